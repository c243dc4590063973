"""Datasets as whole in-memory tensors: MNIST, FashionMNIST and CIFAR-10 through torchvision.

Where the data come from, in order:
1. ``root`` argument, else the ``FLTUTOR_DATA`` environment variable, else the repository's
   ``data/`` folder, read with torchvision (``download=True`` fetches it on a connected machine);
2. if that fails, the small stratified subsets bundled in ``data/bundled/`` (MNIST and
   FashionMNIST only), with a warning that says so;
3. otherwise a ``FileNotFoundError`` that names the fix.
"""
from __future__ import annotations

import hashlib
import os
import warnings
from dataclasses import dataclass, field
from typing import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

__all__ = ["Dataset", "load", "standin", "default_root", "BUNDLED_DIR", "DATASETS", "FederatedData", "make_federated"]

REPO_DATA = Path(__file__).resolve().parent.parent / "data"
BUNDLED_DIR = REPO_DATA / "bundled"


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


def _spec(name: str) -> _Spec:
    key = name.lower().replace("-", "").replace("_", "")
    if key not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; choose one of {sorted(DATASETS)}")
    return DATASETS[key]


def _canonical(name: str) -> str:
    _spec(name)
    return name.lower().replace("-", "").replace("_", "")


def default_root(root: str | os.PathLike | None = None) -> Path:
    """The dataset root: the argument, else $FLTUTOR_DATA, else the repository's data/."""
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


def _bundled_path(name: str) -> Path:
    return BUNDLED_DIR / f"{name}.npz"


def load(name: str, *, train: bool = True, root: str | os.PathLike | None = None,
         download: bool = False) -> Dataset:
    """Load one split of ``name`` ('mnist', 'fashionmnist', 'cifar10') as tensors."""
    spec, key = _spec(name), _canonical(name)
    where = default_root(root)
    import torchvision  # imported late: it is slow to import and only needed here

    cls = getattr(torchvision.datasets, spec.torchvision_name)
    try:
        ds = cls(str(where), train=train, download=download)
        return Dataset(key, _to_tensor(ds.data, spec), torch.as_tensor(np.asarray(ds.targets), dtype=torch.long),
                       spec.classes, "torchvision")
    except (RuntimeError, OSError) as err:  # torchvision: "Dataset not found"; download: network errors
        reason = str(err).splitlines()[0]
    bundled = _bundled_path(key)
    if bundled.exists():
        with np.load(bundled) as z:
            x, y = (z["x_train"], z["y_train"]) if train else (z["x_test"], z["y_test"])
        warnings.warn(
            f"{spec.torchvision_name} not found under {where} ({reason}); using the small bundled "
            f"subset {bundled.name} ({len(y)} {'train' if train else 'test'} images). For the full "
            "dataset set FLTUTOR_DATA to a folder in torchvision's layout, or pass download=True "
            "on a connected machine.", UserWarning, stacklevel=2)
        return Dataset(key, _to_tensor(x, spec), torch.as_tensor(y, dtype=torch.long), spec.classes, "bundled")
    raise FileNotFoundError(
        f"{spec.torchvision_name} not found under {where} ({reason}) and no bundled subset exists "
        f"for it. Fix: pass download=True (or -p download True) on a connected machine, or set "
        f"FLTUTOR_DATA to a folder that holds {spec.torchvision_name} in torchvision's layout.")


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
        h = hashlib.sha256()
        for part in list(self.train) + list(self.test):
            h.update(np.asarray(part, dtype=np.int64).tobytes() + b"|")
        self.fingerprint = h.hexdigest()[:16]

    @property
    def num_clients(self) -> int:
        return len(self.train)

    def with_parts(self, train: Sequence[np.ndarray], test: Sequence[np.ndarray]) -> "FederatedData":
        """The same tensors with another partition (e.g. another seed's), for the runs of one sweep."""
        return FederatedData(self.x, self.y, list(train), list(test), self.x_test, self.y_test, self.groups,
                             self.group_names, self.source)


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
