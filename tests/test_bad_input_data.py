"""Bad inputs to the data loader, table-driven: every case names the error type and what the message
must name (the setting, or the file that is missing or broken, and the fix).

Everything is built in tmp_path from tiny IDX files written here: no download is ever attempted
(the one download case patches torchvision's download to fail as an offline machine does), and
nothing outside the repository is read.
"""
import gzip
import struct
import warnings
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pytest

from fltutor import data
from fltutor.checks import SettingError

N_TRAIN, N_TEST = 20, 10


def write_idx(path, arr):
    arr = np.asarray(arr, dtype=np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(struct.pack(">I", 0x0800 | arr.ndim) + struct.pack(f">{arr.ndim}I", *arr.shape) + arr.tobytes())


def raw(root, name="MNIST"):
    return root / name / "raw"


def tiny_mnist(root, name="MNIST", n_train=N_TRAIN, n_test=N_TEST):
    """A small, valid MNIST-like set in torchvision's layout under root; returns root."""
    rng = np.random.default_rng(0)
    for split, n in (("train", n_train), ("t10k", n_test)):
        write_idx(raw(root, name) / f"{split}-images-idx3-ubyte", rng.integers(0, 256, (n, 28, 28)))
        write_idx(raw(root, name) / f"{split}-labels-idx1-ubyte", np.arange(n) % 10)
    return root


@pytest.fixture(autouse=True)
def nothing_asked(tmp_path, monkeypatch):
    """Each case starts with FLTUTOR_DATA unset and an empty repository data/ folder."""
    monkeypatch.delenv("FLTUTOR_DATA", raising=False)
    repo = tmp_path / "repo-data"
    repo.mkdir()
    monkeypatch.setattr(data, "REPO_DATA", repo)


# ------------------------------------------------------------------------------------------------
# the table: setup(tmp_path, monkeypatch) -> (load kwargs, strings the message must contain)

FIX = ["download=True", "FLTUTOR_DATA"]  # every data-location error says how to fetch or point to the data


@dataclass
class Case:
    id: str
    setup: Callable
    error: type
    names: Callable  # tmp_path -> list of strings the message must contain
    extra: list = field(default_factory=list)


def _kw(**kw):
    return lambda tmp, mp: kw


def _env(folder_fn):
    def setup(tmp, mp):
        mp.setenv("FLTUTOR_DATA", str(folder_fn(tmp)))
        return {"name": "mnist"}
    return setup


def _root(prepare, **kw):
    def setup(tmp, mp):
        root = tmp / "ds"
        prepare(root)
        return {"name": "mnist", "root": root, **kw}
    return setup


def _mkdir(p):
    p.mkdir(parents=True, exist_ok=True)
    return p


def _truncate_images(root):
    tiny_mnist(root)
    f = raw(root) / "train-images-idx3-ubyte"
    f.write_bytes(f.read_bytes()[:-300])  # a copy that stopped early


def _garbage_header(root):
    tiny_mnist(root)
    f = raw(root) / "train-images-idx3-ubyte"
    f.write_bytes(b"<html>404 not found</html>" + f.read_bytes()[26:])  # an error page saved as the file


def _gzipped_only(root):
    tiny_mnist(root)
    f = raw(root) / "train-images-idx3-ubyte"
    f.with_name(f.name + ".gz").write_bytes(gzip.compress(f.read_bytes()))
    f.unlink()


def _gzip_content(root):
    tiny_mnist(root)
    f = raw(root) / "train-images-idx3-ubyte"
    f.write_bytes(gzip.compress(f.read_bytes()))  # downloaded .gz renamed without gunzip


def _labels_missing(root):
    tiny_mnist(root)
    (raw(root) / "train-labels-idx1-ubyte").unlink()


def _more_labels_than_images(root):
    tiny_mnist(root)
    write_idx(raw(root) / "train-images-idx3-ubyte", np.zeros((N_TRAIN - 5, 28, 28)))  # header rewritten, short


def _labels_out_of_range(root):
    tiny_mnist(root)
    write_idx(raw(root) / "train-labels-idx1-ubyte", np.full(N_TRAIN, 12))


def _wrong_image_size(root):
    tiny_mnist(root)
    write_idx(raw(root) / "train-images-idx3-ubyte", np.zeros((N_TRAIN, 32, 32)))


def _trailing_bytes(root):
    tiny_mnist(root)
    f = raw(root) / "t10k-labels-idx1-ubyte"
    f.write_bytes(f.read_bytes() + b"\0" * 7)


def _empty_images_file(root):
    tiny_mnist(root)
    (raw(root) / "train-images-idx3-ubyte").write_bytes(b"")


def _partial_repo(tmp, mp):
    repo = data.REPO_DATA  # the autouse fixture's empty folder
    tiny_mnist(repo)
    (raw(repo) / "t10k-images-idx3-ubyte").unlink()
    return {"name": "mnist"}


def _corrupt_repo(tmp, mp):
    _truncate_images(data.REPO_DATA)
    return {"name": "mnist"}


def _bundled(content: Callable):
    def setup(tmp, mp):
        folder = _mkdir(tmp / "bundled")
        content(folder / "mnist.npz")
        mp.setattr(data, "BUNDLED_DIR", folder)
        return {"name": "mnist"}
    return setup


def _npz(path, **arrays):
    with open(path, "wb") as f:
        np.savez(f, **arrays)


def _offline_download(tmp, mp):
    import torchvision

    def fail(self):
        raise RuntimeError("Error downloading train-images-idx3-ubyte.gz:\nTried https://example, got:\n"
                           "<urlopen error [Errno -3] Temporary failure in name resolution>")
    mp.setattr(torchvision.datasets.MNIST, "download", fail)
    return {"name": "mnist", "download": True}


def _cifar_files(root, skip=None):
    folder = _mkdir(root / "cifar-10-batches-py")
    for f in data._CIFAR_FILES:
        if f != skip:
            (folder / f).write_bytes(b"not a pickle")


def _cifar(skip=None):
    def setup(tmp, mp):
        _cifar_files(tmp / "ds", skip)
        return {"name": "cifar10", "root": tmp / "ds"}
    return setup


R = lambda *parts: (lambda tmp: [str(tmp.joinpath("ds", *parts))])  # the file under root the message names
RAW = lambda f: R("MNIST", "raw", f)

CASES = [
    # settings
    Case("unknown-dataset", _kw(name="svhn"), SettingError, lambda t: ["dataset", "'svhn'", "mnist", "cifar10"]),
    Case("dataset-not-a-string", _kw(name=None), SettingError, lambda t: ["dataset", "None"]),
    Case("download-yes", _kw(name="mnist", download="yes"), SettingError, lambda t: ["download", "'yes'", "True or False"]),
    Case("download-1", _kw(name="mnist", download=1), SettingError, lambda t: ["download", "1", "True or False"]),
    Case("train-string", _kw(name="mnist", train="false"), SettingError, lambda t: ["train", "'false'", "True or False"]),
    Case("train-none", _kw(name="mnist", train=None), SettingError, lambda t: ["train", "None"]),
    Case("root-not-a-path", _kw(name="mnist", root=3), SettingError, lambda t: ["root", "3", "folder path"]),
    Case("root-empty-string", _kw(name="mnist", root=""), SettingError, lambda t: ["root", "''"]),
    # FLTUTOR_DATA set and broken: an error, never the bundled subset
    Case("env-missing-folder", _env(lambda t: t / "nope"), FileNotFoundError,
         lambda t: [f"FLTUTOR_DATA='{t / 'nope'}'", "does not exist", "unset FLTUTOR_DATA"], FIX),
    Case("env-empty-folder", _env(lambda t: _mkdir(t / "empty")), FileNotFoundError,
         lambda t: [str(t / "empty" / "MNIST" / "raw" / "train-images-idx3-ubyte"), "FLTUTOR_DATA=",
                    "unset FLTUTOR_DATA"], FIX),
    Case("env-a-file", _env(lambda t: (t / "f.txt", (t / "f.txt").write_text("x"))[0]), FileNotFoundError,
         lambda t: [str(t / "f.txt"), "not a folder"], FIX),
    # root given and broken
    Case("root-missing", lambda t, mp: {"name": "mnist", "root": t / "ds"}, FileNotFoundError,
         lambda t: [f"root='{t / 'ds'}'", "does not exist", "pass no root"], FIX),
    Case("root-truncated-images", _root(_truncate_images), data.DataError,
         lambda t: RAW("train-images-idx3-ubyte")(t) + ["truncated", "60000"], FIX),
    Case("root-garbage-header", _root(_garbage_header), data.DataError,
         lambda t: RAW("train-images-idx3-ubyte")(t) + ["not an IDX images file"], FIX),
    Case("root-gzip-content", _root(_gzip_content), data.DataError,
         lambda t: RAW("train-images-idx3-ubyte")(t) + ["gunzip"], FIX),
    Case("root-only-gz", _root(_gzipped_only), FileNotFoundError,
         lambda t: RAW("train-images-idx3-ubyte")(t) + ["train-images-idx3-ubyte.gz is there: gunzip"], FIX),
    Case("root-empty-images-file", _root(_empty_images_file), data.DataError,
         lambda t: RAW("train-images-idx3-ubyte")(t) + ["0 bytes"], FIX),
    Case("root-labels-missing", _root(_labels_missing), FileNotFoundError,
         lambda t: RAW("train-labels-idx1-ubyte")(t) + ["not found"], FIX),
    Case("root-more-labels-than-images", _root(_more_labels_than_images), data.DataError,
         lambda t: RAW("train-labels-idx1-ubyte")(t) + RAW("train-images-idx3-ubyte")(t) +
         [f"{N_TRAIN} labels", f"{N_TRAIN - 5} images"], FIX),
    Case("root-labels-out-of-range", _root(_labels_out_of_range), data.DataError,
         lambda t: RAW("train-labels-idx1-ubyte")(t) + ["12", "0...9"], FIX),
    Case("root-wrong-image-size", _root(_wrong_image_size), data.DataError,
         lambda t: RAW("train-images-idx3-ubyte")(t) + ["32x32", "28x28"], FIX),
    Case("root-test-labels-trailing-bytes", _root(_trailing_bytes, train=False), data.DataError,
         lambda t: RAW("t10k-labels-idx1-ubyte")(t) + ["longer than its header"], FIX),
    Case("root-cifar-batch-missing", _cifar(skip="data_batch_3"), FileNotFoundError,
         lambda t: R("cifar-10-batches-py", "data_batch_3")(t), FIX),
    Case("root-cifar-corrupt-batch", _cifar(), data.DataError,
         lambda t: R("cifar-10-batches-py", "data_batch_1")(t) + ["MD5"], FIX),
    # the repository's data/ holds the dataset's folder but it is partial or corrupt: an error too
    Case("repo-partial", _partial_repo, FileNotFoundError,
         lambda t: [str(t / "repo-data" / "MNIST" / "raw" / "t10k-images-idx3-ubyte"),
                    f"remove {t / 'repo-data' / 'MNIST'}"], FIX),
    Case("repo-truncated", _corrupt_repo, data.DataError,
         lambda t: [str(t / "repo-data" / "MNIST" / "raw" / "train-images-idx3-ubyte"), "truncated"], FIX),
    # download=True asked for and failed (offline): an error, not the bundled subset
    Case("download-offline", _offline_download, FileNotFoundError,
         lambda t: [str(t / "repo-data" / "MNIST" / "raw" / "train-images-idx3-ubyte"), "download=True failed",
                    "name resolution", "download=False"], FIX),
    # the bundled subset itself is broken
    Case("bundled-garbage", _bundled(lambda p: p.write_bytes(b"garbage, not an npz")), data.DataError,
         lambda t: [str(t / "bundled" / "mnist.npz"), "not an .npz", "build_bundled_data.py"]),
    Case("bundled-missing-array", _bundled(lambda p: _npz(p, x_test=np.zeros((2, 28, 28), np.uint8))), data.DataError,
         lambda t: [str(t / "bundled" / "mnist.npz"), "x_train"]),
    Case("bundled-inconsistent", _bundled(lambda p: _npz(p, x_train=np.zeros((5, 28, 28), np.uint8),
                                                        y_train=np.zeros(7, np.uint8))), data.DataError,
         lambda t: [str(t / "bundled" / "mnist.npz"), "7 labels", "5 images"]),
    Case("bundled-truncated-zip", _bundled(lambda p: (_npz(p, x_train=np.zeros((5, 28, 28), np.uint8),
                                                          y_train=np.zeros(5, np.uint8)),
                                                     p.write_bytes(p.read_bytes()[:200]))), data.DataError,
         lambda t: [str(t / "bundled" / "mnist.npz"), "unreadable"]),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case, tmp_path, monkeypatch):
    kwargs = case.setup(tmp_path, monkeypatch)
    name = kwargs.pop("name")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a failing load must not warn (no silent fallback on the way)
        with pytest.raises(case.error) as info:
            data.load(name, **kwargs)
    msg = str(info.value)
    for s in case.names(tmp_path) + case.extra:
        assert s in msg, f"{s!r} not in message:\n{msg}"


def test_errors_are_the_documented_types():
    assert issubclass(data.DataError, RuntimeError) and issubclass(SettingError, ValueError)


# ------------------------------------------------------------------------------------------------
# the positive cases


def test_nothing_asked_and_repo_data_empty_gives_bundled_with_warning():
    with pytest.warns(UserWarning, match="bundled subset mnist.npz"):
        ds = data.load("mnist", train=False)
    assert ds.source == "bundled" and ds.x.shape[1:] == (1, 28, 28)


def test_empty_fltutor_data_counts_as_unset(monkeypatch):
    monkeypatch.setenv("FLTUTOR_DATA", "")
    with pytest.warns(UserWarning, match="bundled subset"):
        assert data.load("fashionmnist", train=False).source == "bundled"


def test_valid_tiny_dataset_in_root_loads_without_warning(tmp_path):
    root = tiny_mnist(tmp_path / "ds")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        train = data.load("mnist", root=root)
        test = data.load("mnist", train=False, root=root)
    assert train.source == test.source == "torchvision"
    assert (len(train), len(test)) == (N_TRAIN, N_TEST) and train.y.tolist() == [i % 10 for i in range(N_TRAIN)]


def test_root_wins_over_a_broken_fltutor_data(tmp_path, monkeypatch):
    monkeypatch.setenv("FLTUTOR_DATA", str(tmp_path / "nope"))
    assert len(data.load("fashionmnist", root=tiny_mnist(tmp_path / "ds", "FashionMNIST"))) == N_TRAIN


def test_download_true_with_data_present_reads_it_without_network(tmp_path, monkeypatch):
    import torchvision
    monkeypatch.setattr(torchvision.datasets.MNIST, "download", lambda self: None)  # belt and braces: no network
    assert len(data.load("mnist", root=tiny_mnist(tmp_path / "ds"), download=True)) == N_TRAIN


def test_fltutor_data_bundled_asks_for_the_bundled_subset_by_name(monkeypatch):
    import warnings
    monkeypatch.setenv("FLTUTOR_DATA", "bundled")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ds = data.load("mnist", train=False)
    assert ds.source == "bundled" and len(ds) > 0
    with pytest.raises(FileNotFoundError, match="no bundled subset exists for CIFAR10"):
        data.load("cifar10")
