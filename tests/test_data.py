import struct
import warnings

import numpy as np
import pytest
import torch

from fltutor import data
from fltutor.models import make_model


def _write_idx(path, arr):
    arr = np.asarray(arr, dtype=np.uint8)
    path.write_bytes(struct.pack(">I", 0x0800 | arr.ndim) + struct.pack(f">{arr.ndim}I", *arr.shape) + arr.tobytes())


@pytest.fixture
def tiny_mnist_root(tmp_path):
    """A 30-image MNIST in torchvision's on-disk layout (raw IDX files)."""
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for split, n in (("train", 30), ("t10k", 10)):
        _write_idx(raw / f"{split}-images-idx3-ubyte", rng.integers(0, 256, (n, 28, 28)))
        _write_idx(raw / f"{split}-labels-idx1-ubyte", np.arange(n) % 10)
    return tmp_path


def test_torchvision_layout_is_read_and_normalised(tiny_mnist_root):
    ds = data.load("mnist", root=tiny_mnist_root)
    assert ds.source == "torchvision" and ds.x.shape == (30, 1, 28, 28) and ds.x.dtype == torch.float32
    assert ds.y.tolist() == [i % 10 for i in range(30)]
    # pixel 0 maps to -mean/std, pixel 255 to (1-mean)/std
    assert ds.x.min() >= (0 - 0.1307) / 0.3081 - 1e-5 and ds.x.max() <= (1 - 0.1307) / 0.3081 + 1e-5
    assert len(data.load("mnist", train=False, root=tiny_mnist_root)) == 10


def test_root_precedence(tmp_path, monkeypatch):
    monkeypatch.setenv("FLTUTOR_DATA", str(tmp_path / "env"))
    assert data.default_root(tmp_path / "arg") == tmp_path / "arg"
    assert data.default_root() == tmp_path / "env"
    monkeypatch.delenv("FLTUTOR_DATA")
    assert data.default_root() == data.REPO_DATA


def test_env_variable_is_used(tiny_mnist_root, monkeypatch):
    monkeypatch.setenv("FLTUTOR_DATA", str(tiny_mnist_root))
    assert len(data.load("mnist")) == 30


@pytest.mark.parametrize("name", ["mnist", "fashionmnist"])
def test_bundled_fallback_warns_and_is_stratified(tmp_path, monkeypatch, name):
    # the fallback happens only when nothing was asked for: no root, no FLTUTOR_DATA, no download,
    # and the repository's data/ holds no folder for the dataset
    monkeypatch.setattr(data, "REPO_DATA", tmp_path)
    monkeypatch.delenv("FLTUTOR_DATA", raising=False)
    with pytest.warns(UserWarning, match="bundled subset"):
        train = data.load(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        test = data.load(name, train=False)
    assert train.source == "bundled" and train.x.shape == (6000, 1, 28, 28)
    assert np.bincount(train.y.numpy()).tolist() == [600] * 10
    assert len(test) == 10000  # the whole official test split
    # the provenance index points into the 60,000-image training split
    with np.load(data.BUNDLED_DIR / f"{name}.npz") as z:
        assert z["train_source_index"].max() < 60000 and len(np.unique(z["train_source_index"])) == 6000


def test_missing_everywhere_names_the_fix(tmp_path):
    with pytest.raises(FileNotFoundError, match="download=True"):
        data.load("cifar10", root=tmp_path)


def test_unknown_dataset():
    with pytest.raises(ValueError, match=r"dataset: got the string 'svhn'; expected one of \['cifar10', 'fashionmnist', 'mnist'\]"):
        data.load("svhn")


def test_cifar_standin_runs_through_the_cifar_model():
    ds = data.standin("cifar10", 64, seed=0)
    assert ds.x.shape == (64, 3, 32, 32) and ds.source == "standin"
    assert np.bincount(ds.y.numpy()).min() >= 6
    assert make_model("cnn_cifar", seed=0)(ds.x).shape == (64, 10)
    # train and test share class prototypes (so a stand-in model can generalise) but not noise:
    # class means of the two splits agree far better across splits for the same class than for another
    a, b = data.standin("cifar10", 2000, seed=0), data.standin("cifar10", 2000, train=False, seed=0)
    mean = lambda d, c: d.x[d.y == c].mean(0).flatten()
    same = torch.stack([torch.corrcoef(torch.stack([mean(a, c), mean(b, c)]))[0, 1] for c in range(10)])
    other = torch.stack([torch.corrcoef(torch.stack([mean(a, c), mean(b, (c + 1) % 10)]))[0, 1] for c in range(10)])
    assert same.min() > 0.8 and other.abs().max() < 0.2
    assert not torch.equal(a.x[:10], b.x[:10])


def test_cifar_layout_hwc_becomes_chw_per_channel_normalised():
    # torchvision's CIFAR10.data is (n, 32, 32, 3) uint8; channel c must use mean[c], std[c]
    img = np.zeros((2, 32, 32, 3), np.uint8)
    img[..., 1] = 255
    x = data._to_tensor(img, data.DATASETS["cifar10"])
    assert x.shape == (2, 3, 32, 32)
    torch.testing.assert_close(x[0, 0, 0, 0], torch.tensor((0 - 0.4914) / 0.2470))
    torch.testing.assert_close(x[0, 1, 5, 5], torch.tensor((1 - 0.4822) / 0.2435))


def test_fingerprint_covers_the_tensors_not_only_the_partition():
    # two datasets with the same partition but other pixels (FedCMNIST colours, a test subset) must not
    # share a cache key; the same tensors under another partition object keep it
    import numpy as np
    import torch
    from fltutor.data import FederatedData
    x, y = torch.zeros(6, 1, 2, 2), torch.arange(6) % 2
    parts = [np.array([0, 1]), np.array([2, 3])], [np.array([4]), np.array([5])]
    a = FederatedData(x, y, *parts, x_test=x[:2], y_test=y[:2])
    x2 = x.clone()
    x2[5, 0, 1, 1] = 1e-7                                  # one pixel of one sample
    assert FederatedData(x2, y, *parts, x_test=x[:2], y_test=y[:2]).fingerprint != a.fingerprint
    assert FederatedData(x, y, *parts, x_test=x[:1], y_test=y[:1]).fingerprint != a.fingerprint
    assert FederatedData(x.clone(), y.clone(), *parts, x_test=x[:2], y_test=y[:2]).fingerprint == a.fingerprint
    assert a.with_parts(*parts).fingerprint == a.fingerprint


def test_dataclasses_replace_with_new_tensors_takes_a_new_fingerprint(monkeypatch):
    # dataclasses.replace copies the private hash too; it must not vouch for the new pixels (a sweep would
    # reload another dataset's runs from its cache), while with_parts, same tensors, reuses it unhashed
    import dataclasses
    import numpy as np
    import torch
    from fltutor import data
    x, y = torch.zeros(6, 1, 2, 2), torch.arange(6) % 2
    parts = [np.array([0, 1]), np.array([2, 3])], [np.array([4]), np.array([5])]
    a = data.FederatedData(x, y, *parts, x_test=x[:2], y_test=y[:2])
    b = dataclasses.replace(a, x=x + 1, x_test=x[:2] + 1)                       # e.g. inputs rescaled to [0, 1]
    assert b.fingerprint != a.fingerprint
    assert b.fingerprint == data.FederatedData(x + 1, y, *parts, x_test=x[:2] + 1, y_test=y[:2]).fingerprint
    calls = []
    monkeypatch.setattr(data, "tensor_hash", lambda *t: calls.append(1) or "x")
    assert a.with_parts(*parts).fingerprint == a.fingerprint and not calls


def test_balanced_subset_takes_n_over_k_of_each_class_in_order():
    ds = data.standin("mnist", 1000, seed=0)                        # 100 of each class, shuffled
    sub = data.balanced_subset(ds, 300, seed=3)
    assert torch.bincount(sub.y, minlength=10).tolist() == [30] * 10
    # every kept sample is one of the split's own rows, and they keep the split's order
    rows = [int(torch.nonzero((ds.x == sub.x[i]).flatten(1).all(1)).item()) for i in range(len(sub))]
    assert rows == sorted(rows) and len(set(rows)) == 300
    assert torch.equal(ds.y[rows], sub.y) and sub.source == ds.source and sub.classes == ds.classes
    # the draw depends on the seed alone
    assert torch.equal(data.balanced_subset(ds, 300, seed=3).x, sub.x)
    assert not torch.equal(data.balanced_subset(ds, 300, seed=4).x, sub.x)
    assert data.balanced_subset(ds, None) is ds and data.balanced_subset(ds, 5000) is ds


def test_balanced_subset_refuses_what_a_class_cannot_give():
    ds = data.standin("mnist", 1000, seed=0)
    keep = torch.cat([torch.nonzero(ds.y != 7).flatten(), torch.nonzero(ds.y == 7).flatten()[:10]])
    short = data.Dataset(ds.name, ds.x[keep], ds.y[keep], ds.classes, ds.source)   # class 7 has 10 samples
    with pytest.raises(ValueError, match=r"20 per class, but class\(es\) \[7\].*fewer \(10\)"):
        data.balanced_subset(short, 200)
    for bad in (0, -5, 2.5, True):
        with pytest.raises(ValueError, match="n: .*positive integer"):
            data.balanced_subset(ds, bad)
