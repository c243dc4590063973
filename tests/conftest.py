import numpy as np
import pytest


@pytest.fixture
def labels():
    """60 samples of each of 10 classes, shuffled: a small stand-in for a labelled dataset."""
    return np.random.default_rng(123).permutation(np.repeat(np.arange(10), 60))
