import numpy as np
import pytest
import torch

# The tests use tiny models, where one thread is faster than two that contend for the cores.
torch.set_num_threads(1)


@pytest.fixture
def labels():
    """60 samples of each of 10 classes, shuffled: a small stand-in for a labelled dataset."""
    return np.random.default_rng(123).permutation(np.repeat(np.arange(10), 60))


@pytest.fixture(scope="session")
def load_script():
    """``load_script("name")``: scripts/name.py as a module (the scripts are files, not a package)."""
    import importlib.util
    from pathlib import Path

    def load(name):
        spec = importlib.util.spec_from_file_location(name, Path(__file__).parents[1] / "scripts" / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    return load
