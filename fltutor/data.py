"""Datasets as whole in-memory tensors: MNIST, FashionMNIST and CIFAR-10 through torchvision.

Where the data come from:
1. the folder asked for: the ``root`` argument, else the ``FLTUTOR_DATA`` environment variable
   (when set and not empty), else the repository's ``data/`` folder. It is read with torchvision,
   so it must be in torchvision's layout (``<folder>/MNIST/raw/train-images-idx3-ubyte`` and the
   other three IDX files, ``<folder>/FashionMNIST/raw/...``, ``<folder>/cifar-10-batches-py/``);
   ``download=True`` fetches what is missing on a connected machine. ``FLTUTOR_DATA=bundled``
   asks for the bundled subsets by name (the notebook tests use it).
2. the small stratified subsets bundled in ``data/bundled/`` (MNIST and FashionMNIST only), with a
   warning that says so, but only when nothing was asked for: ``root`` is None, ``FLTUTOR_DATA`` is
   unset or empty, ``download`` is False and the repository's ``data/`` has no folder for the dataset.
3. otherwise an error that names the file and the fix (``download=True`` on a connected machine,
   pointing ``FLTUTOR_DATA``/``root`` at a folder in torchvision's layout, or leaving them unset to
   use the bundled subset):

   * ``FileNotFoundError``: the folder or a file torchvision needs is missing (also after a failed
     ``download=True``);
   * ``DataError`` (a ``RuntimeError``): a file is there but truncated, corrupt or inconsistent
     (an IDX header that is not one, a size that disagrees with the header, more labels than
     images, labels outside 0..9, a CIFAR batch whose MD5 is wrong, an unreadable bundled ``.npz``);
   * ``checks.SettingError`` (a ``ValueError``): an unknown dataset name, or ``train``/``download``
     not a bool, or ``root`` not a path.

A folder that was asked for and is broken is never replaced silently by the bundled subset. The
checks cost a few ``stat`` calls and a 16-byte header read on top of torchvision's own reading;
nothing is hashed that torchvision does not hash itself (it MD5-checks CIFAR-10 on every load).
A self-consistent IDX set of another size than the official splits (``SPLIT_SIZES``) is read as
given: a truncated file is caught by its header, whose counts then disagree with its size.
"""
from __future__ import annotations

import hashlib
import os
import struct
import warnings
import zipfile
from dataclasses import dataclass, field
from typing import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from .checks import SettingError, describe, flag

__all__ = ["Dataset", "DataError", "load", "standin", "balanced_subset", "tensor_hash", "default_root", "BUNDLED_DIR",
           "DATASETS", "SPLIT_SIZES", "FederatedData", "make_federated"]

REPO_DATA = Path(__file__).resolve().parent.parent / "data"
BUNDLED_DIR = REPO_DATA / "bundled"


class DataError(RuntimeError):
    """A dataset file that is there but cannot be used: truncated, corrupt or inconsistent.

    The message names the file and the fix. A ``RuntimeError``, as torchvision's own errors are."""


@dataclass(frozen=True)
class _Spec:
    torchvision_name: str
    shape: tuple[int, int, int]  # (channels, height, width)
    mean: tuple[float, ...]
    std: tuple[float, ...]
    classes: tuple[str, ...]


DATASETS = {
    "mnist": _Spec("MNIST", (1, 28, 28), (0.1307,), (0.3081,), tuple(str(i) for i in range(10))),
    "fashionmnist": _Spec("FashionMNIST", (1, 28, 28), (0.2860,), (0.3530,),
                          ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal",
                           "Shirt", "Sneaker", "Bag", "Ankle boot")),
    "cifar10": _Spec("CIFAR10", (3, 32, 32), (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616),
                     ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse",
                      "ship", "truck")),
}

# (train, test) images in the official splits; quoted in the error messages.
SPLIT_SIZES = {"mnist": (60000, 10000), "fashionmnist": (60000, 10000), "cifar10": (50000, 10000)}

_CIFAR_FOLDER = "cifar-10-batches-py"
_CIFAR_FILES = tuple(f"data_batch_{i}" for i in range(1, 6)) + ("test_batch", "batches.meta")
_IDX_MAGIC = {"images": 0x00000803, "labels": 0x00000801}  # uint8 data, 3 or 1 dimensions


@dataclass
class Dataset:
    """A whole split in memory: x (n, channels, H, W) normalised float32, y (n,) int64."""
    name: str
    x: Tensor
    y: Tensor
    classes: tuple[str, ...]
    source: str  # "torchvision", "bundled" or "standin"

    def __len__(self) -> int:
        return len(self.y)


def _key(name) -> str:
    if not isinstance(name, str):
        raise SettingError(f"dataset: got {describe(name)}; expected one of {sorted(DATASETS)}.")
    key = name.lower().replace("-", "").replace("_", "")
    if key not in DATASETS:
        raise SettingError(f"dataset: got {describe(name)}; expected one of {sorted(DATASETS)} "
                           "(case, '-' and '_' are ignored).")
    return key


def _spec(name: str) -> _Spec:
    return DATASETS[_key(name)]


def _canonical(name: str) -> str:
    return _key(name)


def default_root(root: str | os.PathLike | None = None) -> Path:
    """The dataset root: the argument, else $FLTUTOR_DATA (if set and not empty), else the repository's data/."""
    if root is not None:
        return Path(root)
    env = os.environ.get("FLTUTOR_DATA")
    return Path(env) if env else REPO_DATA


def _to_tensor(images, spec: _Spec) -> Tensor:
    """uint8 images (n, H, W) or (n, H, W, 3) -> normalised float32 (n, C, H, W)."""
    x = torch.as_tensor(np.asarray(images))
    if x.ndim == 3:
        x = x.unsqueeze(1)          # (n, 1, H, W)
    elif x.shape[-1] == 3:
        x = x.permute(0, 3, 1, 2)   # (n, H, W, 3) -> (n, 3, H, W)
    x = x.float().div_(255.0)
    mean = torch.tensor(spec.mean).view(1, -1, 1, 1)
    std = torch.tensor(spec.std).view(1, -1, 1, 1)
    return ((x - mean) / std).contiguous()


def pixel_bounds(name: str) -> tuple[float, float]:
    """(lo, hi): pixel values 0 and 1 after this dataset's normalisation (the widest over channels).

    Attacks that rebuild images clip to these bounds, and score PSNR with data range hi - lo,
    which equals PSNR of the [0, 1] pixels for a one-channel dataset.
    """
    spec = _spec(name)
    return (min((0 - m) / s for m, s in zip(spec.mean, spec.std)), max((1 - m) / s for m, s in zip(spec.mean, spec.std)))


def _bundled_path(name: str) -> Path:
    return BUNDLED_DIR / f"{name}.npz"


# ---------------------------------------------------------------------------------------------
# where the data should be, and what to say when they are not usable


def _folder(spec: _Spec) -> str:
    """The dataset's own folder under a root, in torchvision's layout."""
    return _CIFAR_FOLDER if spec.torchvision_name == "CIFAR10" else spec.torchvision_name


def _split_files(where: Path, spec: _Spec, train: bool) -> tuple[Path, Path]:
    """(images, labels) files of one split of an MNIST-like dataset."""
    raw, split = where / spec.torchvision_name / "raw", "train" if train else "t10k"
    return raw / f"{split}-images-idx3-ubyte", raw / f"{split}-labels-idx1-ubyte"


def _required(where: Path, spec: _Spec) -> list[Path]:
    """Every file torchvision needs to load either split (it checks all of them, whichever split)."""
    if spec.torchvision_name == "CIFAR10":
        return [where / _CIFAR_FOLDER / f for f in _CIFAR_FILES]
    return [*_split_files(where, spec, True), *_split_files(where, spec, False)]


def _layout(spec: _Spec) -> str:
    if spec.torchvision_name == "CIFAR10":
        return f"<folder>/{_CIFAR_FOLDER}/{{{','.join(_CIFAR_FILES)}}}"
    n = spec.torchvision_name
    return (f"<folder>/{n}/raw/train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte "
            "and t10k-labels-idx1-ubyte (uncompressed)")


def _origin(root) -> str:
    """What was asked for: 'root', 'FLTUTOR_DATA' or 'repo' (nothing: the repository's data/)."""
    if root is not None:
        return "root"
    return "FLTUTOR_DATA" if os.environ.get("FLTUTOR_DATA") else "repo"


def _where_text(where: Path, origin: str) -> str:
    if origin == "root":
        return f"root={str(where)!r}"
    if origin == "FLTUTOR_DATA":
        return f"FLTUTOR_DATA={os.environ.get('FLTUTOR_DATA')!r}"
    return f"the repository's data folder {where}"


def _fix(key: str, spec: _Spec, where: Path, origin: str, download: bool) -> str:
    steps = ["on a connected machine pass download=True (command line: -p download true)",
             f"point FLTUTOR_DATA (or root=) to a folder in torchvision's layout: {_layout(spec)}"]
    if _bundled_path(key).exists():
        if origin == "FLTUTOR_DATA":
            steps.append("unset FLTUTOR_DATA to use the small bundled subset")
        elif origin == "root":
            steps.append("pass no root (and leave FLTUTOR_DATA unset) to use the small bundled subset")
        elif download:
            steps.append("pass download=False to use the small bundled subset")
        else:
            steps.append(f"remove {where / _folder(spec)} to use the small bundled subset")
    return "Fix: " + "; or ".join(steps) + "."


def _short(err: BaseException, limit: int = 300) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return text if len(text) <= limit else text[:limit] + " ..."


# ---------------------------------------------------------------------------------------------
# checks: cheap (stat, a 16-byte header, the loaded arrays' shapes and label range)


def _check_idx(path: Path, kind: str, spec: _Spec, full: int, fix: str) -> int:
    """The count an IDX ``kind`` ('images' or 'labels') file declares, after checking its header and size."""
    head_len = 16 if kind == "images" else 8
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(head_len)
    if len(head) < head_len:
        raise DataError(f"{path} is truncated: {size} bytes, shorter than the {head_len}-byte header of an IDX "
                        f"{kind} file. {fix}")
    magic = struct.unpack(">I", head[:4])[0]
    if magic != _IDX_MAGIC[kind]:
        hint = " It looks gzip-compressed: gunzip it." if head[:2] == b"\x1f\x8b" else ""
        raise DataError(f"{path} is not an IDX {kind} file: it starts with 0x{magic:08x}, expected "
                        f"0x{_IDX_MAGIC[kind]:08x} (corrupt or the wrong file).{hint} {fix}")
    dims = struct.unpack(">3I", head[4:16]) if kind == "images" else struct.unpack(">I", head[4:8])
    if kind == "images" and dims[1:] != spec.shape[1:]:
        raise DataError(f"{path} declares images of {dims[1]}x{dims[2]} pixels; {spec.torchvision_name} has "
                        f"{spec.shape[1]}x{spec.shape[2]} (corrupt header or another dataset's file). {fix}")
    expected = head_len + int(np.prod(dims))
    if size != expected:
        what = "truncated" if size < expected else "longer than its header says (corrupt)"
        raise DataError(f"{path} is {what}: its header declares {dims[0]} {kind} ({expected} bytes) but the "
                        f"file has {size} bytes (the official split has {full} {kind}). {fix}")
    return dims[0]


def _check_files(where: Path, spec: _Spec, key: str, train: bool, origin: str, download: bool,
                 note: str = "") -> None:
    """Raise FileNotFoundError/DataError naming the first missing or broken file under ``where``."""
    fix = _fix(key, spec, where, origin, download)
    note = f" {note}" if note else ""
    src = _where_text(where, origin)
    if not where.exists():
        raise FileNotFoundError(f"{src}: the folder {where} does not exist; expected {spec.torchvision_name} "
                                f"in it in torchvision's layout.{note} {fix}")
    if not where.is_dir():
        raise FileNotFoundError(f"{src}: {where} is a file, not a folder.{note} {fix}")
    mnist_like = spec.torchvision_name != "CIFAR10"
    processed = where / spec.torchvision_name / "processed"
    if mnist_like and (processed / "training.pt").is_file() and (processed / "test.pt").is_file():
        return  # torchvision's legacy layout: it reads these instead of raw/; checked once loaded
    missing = [p for p in _required(where, spec) if not p.is_file()]
    if missing:
        folder = where / _folder(spec)
        state = "is missing" if not folder.exists() else f"holds no {missing[0].name}"
        gz = missing[0].with_name(missing[0].name + ".gz")
        gz_hint = f" ({gz.name} is there: gunzip it.)" if gz.is_file() else ""
        more = f" (also missing: {', '.join(p.name for p in missing[1:])})" if len(missing) > 1 else ""
        raise FileNotFoundError(f"{missing[0]} not found: under {src} the folder {folder} {state}{more}."
                                f"{gz_hint} torchvision needs all {len(_required(where, spec))} files, whichever "
                                f"split is loaded.{note} {fix}")
    if mnist_like:
        images, labels = _split_files(where, spec, train)
        full = SPLIT_SIZES[key][0 if train else 1]
        n_images = _check_idx(images, "images", spec, full, fix)
        n_labels = _check_idx(labels, "labels", spec, full, fix)
        if n_images != n_labels:
            raise DataError(f"{labels} holds {n_labels} labels but {images} holds {n_images} images; one of them "
                            f"is truncated or from another copy (the official split has {full} of each). {fix}")


def _check_arrays(x_shape: tuple, y: Tensor, spec: _Spec, images: str, labels: str, fix: str) -> None:
    """The loaded split is usable: images of the dataset's shape, one label per image, labels in range."""
    c, h, w = spec.shape
    want = (h, w) if c == 1 else (h, w, c)
    if len(x_shape) != len(want) + 1 or tuple(x_shape[1:]) != want:
        raise DataError(f"{images} holds an array of shape {tuple(x_shape)}; expected (n, {', '.join(map(str, want))}) "
                        f"for {spec.torchvision_name}. {fix}")
    if x_shape[0] == 0:
        raise DataError(f"{images} holds no images. {fix}")
    if y.ndim != 1 or len(y) != x_shape[0]:
        raise DataError(f"{labels} holds {len(y) if y.ndim == 1 else tuple(y.shape)} labels but {images} holds "
                        f"{x_shape[0]} images; one of them is truncated or corrupt. {fix}")
    lo, hi = int(y.min()), int(y.max())
    if lo < 0 or hi >= len(spec.classes):
        raise DataError(f"{labels} holds labels from {lo} to {hi}; {spec.torchvision_name} labels are 0..."
                        f"{len(spec.classes) - 1} (corrupt file). {fix}")


def _bad_cifar_file(where: Path, cls) -> Path | None:
    """The first CIFAR-10 file whose MD5 is not the published one (only called after a failed load)."""
    from torchvision.datasets.utils import check_integrity
    for fname, md5 in list(cls.train_list) + list(cls.test_list) + [(cls.meta["filename"], cls.meta["md5"])]:
        path = where / _CIFAR_FOLDER / fname
        if not check_integrity(str(path), md5):
            return path
    return None


def _load_bundled(key: str, spec: _Spec, train: bool) -> tuple[np.ndarray, Tensor, Path]:
    path = _bundled_path(key)
    fix = (f"Fix: restore it (git checkout -- data/bundled/{path.name}) or rebuild it with "
           "scripts/build_bundled_data.py; or point FLTUTOR_DATA to the full dataset in torchvision's layout.")
    xk, yk = ("x_train", "y_train") if train else ("x_test", "y_test")
    if not zipfile.is_zipfile(path):
        raise DataError(f"the bundled subset {path} is unreadable: it is not an .npz (zip) archive (truncated or "
                        f"overwritten). {fix}")
    try:
        with np.load(path, allow_pickle=False) as z:
            x, y = z[xk], z[yk]
        y_long = torch.as_tensor(np.asarray(y).astype(np.int64))
    except (MemoryError, KeyboardInterrupt):
        raise
    except Exception as err:  # BadZipFile, ValueError (pickled/garbage), KeyError (missing array), OSError
        raise DataError(f"the bundled subset {path} is unreadable ({type(err).__name__}: {_short(err)}); it should "
                        f"be an .npz with uint8 arrays {xk} (n, {spec.shape[1]}, {spec.shape[2]}) and {yk} (n,). "
                        f"{fix}") from err
    if x.dtype != np.uint8:
        raise DataError(f"the bundled subset {path}: {xk} is {x.dtype}, expected uint8 pixels. {fix}")
    _check_arrays(x.shape, y_long, spec, f"the bundled subset {path} ({xk})", f"the bundled subset {path} ({yk})",
                  fix)
    return x, y_long, path


# ---------------------------------------------------------------------------------------------


def load(name: str, *, train: bool = True, root: str | os.PathLike | None = None,
         download: bool = False) -> Dataset:
    """Load one split of ``name`` ('mnist', 'fashionmnist', 'cifar10') as tensors.

    See the module docstring for where the data come from and which errors name which problem.
    """
    key = _key(name)
    spec = DATASETS[key]
    train = flag("train", train)
    download = flag("download", download)
    if root is not None and (not isinstance(root, (str, os.PathLike)) or not os.fspath(root)):
        raise SettingError(f"root: got {describe(root)}; expected a folder path (str or pathlib.Path) or None.")
    origin = _origin(root)
    if origin == "FLTUTOR_DATA" and os.environ["FLTUTOR_DATA"] == "bundled":   # asked for by name: no warning
        if not _bundled_path(key).exists():
            raise FileNotFoundError(f"FLTUTOR_DATA='bundled' but no bundled subset exists for "
                                    f"{spec.torchvision_name} (only {sorted(p.stem for p in BUNDLED_DIR.glob('*.npz'))})")
        x, y, _ = _load_bundled(key, spec, train)
        return Dataset(key, _to_tensor(x, spec), y, spec.classes, "bundled")
    where = default_root(root)

    if origin == "repo" and not download and not (where / _folder(spec)).exists():
        # nothing was asked for and the repository's data/ does not hold the dataset: the bundled subset
        if not _bundled_path(key).exists():
            raise FileNotFoundError(
                f"{spec.torchvision_name} not found: {where / _folder(spec)} does not exist, FLTUTOR_DATA is unset and "
                f"no bundled subset exists for it. {_fix(key, spec, where, origin, download)}")
        x, y, path = _load_bundled(key, spec, train)
        warnings.warn(
            f"{spec.torchvision_name} is not in {where} (no {_folder(spec)} folder) and FLTUTOR_DATA is unset; "
            f"using the small bundled subset {path.name} ({len(y)} {'train' if train else 'test'} images). For "
            "the full dataset set FLTUTOR_DATA to a folder in torchvision's layout, or pass download=True on a "
            "connected machine.", UserWarning, stacklevel=2)
        return Dataset(key, _to_tensor(x, spec), y, spec.classes, "bundled")

    if not download:
        _check_files(where, spec, key, train, origin, download)
    fix = _fix(key, spec, where, origin, download)
    if spec.torchvision_name == "CIFAR10":
        images = labels = f"{where / _CIFAR_FOLDER} ({'data_batch_1..5' if train else 'test_batch'})"
    else:
        images, labels = map(str, _split_files(where, spec, train))

    import torchvision  # imported late: it is slow to import and only needed here
    cls = getattr(torchvision.datasets, spec.torchvision_name)
    try:
        ds = cls(str(where), train=train, download=download)
        x_shape, y = tuple(ds.data.shape), torch.as_tensor(np.asarray(ds.targets), dtype=torch.long)
    except (MemoryError, KeyboardInterrupt):
        raise
    except Exception as err:  # torchvision: RuntimeError, ValueError, AssertionError, pickle/struct errors ...
        reason = f"{type(err).__name__}: {_short(err)}"
        if download:  # say what is still missing or broken after the download attempt
            _check_files(where, spec, key, train, origin, download, note=f"download=True failed: {reason}.")
        if spec.torchvision_name == "CIFAR10":
            bad = _bad_cifar_file(where, cls)
            if bad is not None:
                raise DataError(f"{bad} does not match its published MD5: it is truncated or corrupt "
                                f"(torchvision: {reason}). Delete it and fetch it again. {fix}") from err
        raise DataError(f"{spec.torchvision_name} under {_where_text(where, origin)} could not be read "
                        f"({reason}); the files are {images} and {labels}. Replace them with intact copies. "
                        f"{fix}") from err
    _check_arrays(x_shape, y, spec, images, labels, fix)
    return Dataset(key, _to_tensor(ds.data, spec), y, spec.classes, "torchvision")


def standin(name: str, num_samples: int, *, train: bool = True, seed: int) -> Dataset:
    """Random images of the dataset's exact shape and balanced labels, for offline tests.

    Used where a dataset cannot be had (CIFAR-10 on the offline build machines). Each
    class has a fixed random prototype image (the same for train and test), and a sample
    is its prototype plus unit Gaussian noise, so the labels are learnable.
    """
    spec = _spec(name)
    prototypes = torch.randn(len(spec.classes), *spec.shape, generator=torch.Generator().manual_seed(12345))
    g = torch.Generator().manual_seed(seed * 2 + int(train))
    y = torch.arange(num_samples) % len(spec.classes)
    y = y[torch.randperm(num_samples, generator=g)]
    x = 0.5 * prototypes[y] + torch.randn(num_samples, *spec.shape, generator=g)  # (n, C, H, W)
    return Dataset(_canonical(name), x, y, spec.classes, "standin")


def balanced_subset(split: Dataset, n: int | None, *, seed: int = 0) -> Dataset:
    """n // K random samples of each of the split's K classes, in their original order (None or n >= len: all).

    The quick runs of notebook 03 draw their training and test images this way; the draw depends on
    ``seed`` alone."""
    if n is None or n >= len(split):
        return split
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise SettingError(f"n: {n!r} samples; allowed: a positive integer, or None for the whole split")
    g, k = torch.Generator().manual_seed(seed), int(split.y.max()) + 1
    per = [torch.nonzero(split.y == c).flatten() for c in range(k)]                 # K x (n_c,)
    short = [c for c, p in enumerate(per) if len(p) < n // k]
    if short:
        raise SettingError(f"n: {n} samples means {n // k} per class, but class(es) {short} of this {split.name} "
                           f"split have fewer ({min(len(per[c]) for c in short)}); lower n")
    idx = torch.cat([p[torch.randperm(len(p), generator=g)[: n // k]] for p in per]).sort().values
    return Dataset(split.name, split.x[idx], split.y[idx], split.classes, split.source)


def tensor_hash(*tensors) -> str:
    """blake2b of the tensors' shapes, dtypes and bytes (None counts as absent): equal only for equal data."""
    h = hashlib.blake2b(digest_size=16)
    for t in tensors:
        if t is None:
            h.update(b"none|")
            continue
        a = t.detach().cpu().contiguous().numpy()
        h.update(f"{a.dtype}{a.shape}|".encode())
        h.update(memoryview(a).cast("B"))
    return h.hexdigest()


@dataclass
class FederatedData:
    """A partitioned dataset: per-client train/test indices into (x, y), plus a global test set."""
    x: Tensor                      # (n, ...) every client's samples live here
    y: Tensor                      # (n,)
    train: list[np.ndarray]        # client k's local training indices into x
    test: list[np.ndarray]         # client k's local test indices into x
    x_test: Tensor | None = None   # the dataset's own test split, for global accuracy
    y_test: Tensor | None = None
    groups: np.ndarray | None = None          # (N,) subpopulation id per client
    group_names: tuple[str, ...] = ()
    source: str = "unknown"                   # where x came from: "torchvision", "bundled", "standin"
    fingerprint: str = field(default="", init=False)
    _tensor_hash: str | None = field(default=None, repr=False, compare=False)   # of x, y, x_test, y_test
    _hashed: tuple = field(default=(), repr=False, compare=False)   # ids of the tensors _tensor_hash was taken of

    def __post_init__(self):
        if len(self.train) != len(self.test):
            raise ValueError(f"FederatedData: {len(self.train)} train parts but {len(self.test)} test "
                             "parts; build both with partition.split_train_test")
        if self.groups is not None and len(self.groups) != len(self.train):
            raise ValueError(f"FederatedData: groups has {len(self.groups)} entries for "
                             f"{len(self.train)} clients; pass partition.client_groups(groups)")
        empty = [k for k, t in enumerate(self.train) if len(t) == 0]
        if empty:
            raise ValueError(f"FederatedData: clients {empty[:5]} have no training data; "
                             "use a partition that gives every client samples")
        # the tensors too: FedCMNIST colours or a test subset change them, not the parts. A hash handed over
        # counts only for the very tensors it was taken of (``with_parts``); ``dataclasses.replace(fed, x=...)``
        # copies the old hash with new tensors, so it is taken again rather than reused for other data
        ids = tuple(id(t) for t in (self.x, self.y, self.x_test, self.y_test))
        if self._tensor_hash is None or self._hashed != ids:
            self._tensor_hash = tensor_hash(self.x, self.y, self.x_test, self.y_test)
        self._hashed = ids
        h = hashlib.sha256(self._tensor_hash.encode())
        for part in list(self.train) + list(self.test):
            h.update(np.asarray(part, dtype=np.int64).tobytes() + b"|")
        self.fingerprint = h.hexdigest()[:16]

    @property
    def num_clients(self) -> int:
        return len(self.train)

    def with_parts(self, train: Sequence[np.ndarray], test: Sequence[np.ndarray]) -> "FederatedData":
        """The same tensors with another partition (e.g. another seed's), for the runs of one sweep."""
        return FederatedData(self.x, self.y, list(train), list(test), self.x_test, self.y_test, self.groups,
                             self.group_names, self.source, _tensor_hash=self._tensor_hash, _hashed=self._hashed)


def make_federated(train_set, parts: Sequence[np.ndarray], *, test_fraction: float, seed: int,
                   test_set=None, groups=None, group_names=()) -> FederatedData:
    """Split each client's part into local train/test and bundle it with the global test set."""
    from .partition import split_train_test
    tr, te = split_train_test(parts, test_fraction, seed=seed)
    return FederatedData(train_set.x, train_set.y, tr, te,
                         None if test_set is None else test_set.x,
                         None if test_set is None else test_set.y,
                         None if groups is None else np.asarray(groups), tuple(group_names),
                         getattr(train_set, "source", "unknown"))
