import numpy as np
import pytest
import torch

# The tests use tiny models, where one thread is faster than two that contend for the cores.
torch.set_num_threads(1)


@pytest.fixture
def labels():
    """60 samples of each of 10 classes, shuffled: a small stand-in for a labelled dataset."""
    return np.random.default_rng(123).permutation(np.repeat(np.arange(10), 60))
