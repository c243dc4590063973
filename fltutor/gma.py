"""The data settings of Gradient Masked Averaging (Tenison et al., TMLR 2023, Table 1).

- ``label``: each client holds 2 classes (shards, as McMahan et al.);
- ``iid``: uniform random split;
- ``quantity``: Dirichlet(beta = 0.5) client sizes, labels independent of size;
- ``feature``: FedCMNIST, a federated colored MNIST. Every client colors its digits with its
  own label -> color map (the spurious feature); a sample follows the map with probability
  ``spurious`` and otherwise gets a random color of the same palette. The test clients use
  colors from a part of the hue circle that no training client uses, with their own maps;
- ``mixed``: FedCMNIST plus the 2-class label skew.

Global test accuracy is measured on the dataset's test split (colored like the test clients
for FedCMNIST). Each client's own data are also split 90/10 into local train and test.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from . import data as fdata
from . import partition
from .simulate import FederatedData

__all__ = ["SKEWS", "TRAIN_HUES", "TEST_HUES", "GMA_SETTINGS", "hue_to_rgb", "colorize", "gma_data", "last_rounds_mean", "run"]

SKEWS = ("label", "iid", "quantity", "feature", "mixed")
TRAIN_HUES = (0.0, 0.6)   # hue range of the training clients' palettes
TEST_HUES = (0.67, 0.95)  # unseen by any training client


def hue_to_rgb(h: Tensor) -> Tensor:
    """Fully saturated colors for hues in [0, 1): (n,) -> (n, 3) in [0, 1]."""
    h = torch.as_tensor(h, dtype=torch.float32).unsqueeze(-1) * 6
    k = torch.tensor([3.0, 2.0, 4.0])  # red peaks at hue 0, green at 1/3, blue at 2/3
    r = (h - k).abs()
    return torch.stack([(r[..., 0] - 1), (2 - r[..., 1]), (2 - r[..., 2])], -1).clamp(0, 1)


def colorize(x: Tensor, hues: Tensor, *, dataset: str = "mnist") -> Tensor:
    """Gray normalized images (n, 1, H, W) -> colored (n, 3, H, W), normalized to mean 0, std ~1."""
    spec = fdata.DATASETS[fdata._canonical(dataset)]
    if x.ndim != 4 or x.shape[1] != 1:
        raise ValueError(f"colorize: expected gray images (n, 1, H, W), got {tuple(x.shape)}")
    if len(hues) != len(x):
        raise ValueError(f"colorize: {len(x)} images but {len(hues)} hues; pass one hue per image")
    ink = (x * spec.std[0] + spec.mean[0]).clamp(0, 1)            # (n, 1, H, W) in [0, 1]
    rgb = hue_to_rgb(hues).view(-1, 3, 1, 1)                     # (n, 3, 1, 1)
    return ((ink * rgb) - 0.1) / 0.25


def _palette_hues(rng, lo, hi, labels, spurious, num_classes=10):
    """One client's hues: its own label -> hue map, followed with probability ``spurious``."""
    palette = np.linspace(lo, hi, num_classes, endpoint=False)
    mapping = rng.permutation(palette)                            # label c -> mapping[c]
    follow = rng.random(len(labels)) < spurious
    random_hue = rng.choice(palette, size=len(labels))
    return np.where(follow, mapping[labels], random_hue)


def gma_data(dataset: str, skew: str, num_clients: int, *, seed: int, root=None, download: bool = False,
             train_set=None, test_set=None, spurious: float = 0.9, num_test_clients: int = 10,
             beta: float = 0.5, test_fraction: float = 0.1) -> FederatedData:
    """One of GMA's federated splits; see the module docstring for ``skew``."""
    if skew not in SKEWS:
        raise ValueError(f"skew {skew!r} is unknown; choose one of {SKEWS}")
    if not 0 <= spurious <= 1:
        raise ValueError(f"spurious must be a probability in [0, 1], got {spurious}")
    train_set = fdata.load(dataset, train=True, root=root, download=download) if train_set is None else train_set
    test_set = fdata.load(dataset, train=False, root=root, download=download) if test_set is None else test_set
    y = train_set.y.numpy()
    if skew in ("label", "mixed"):
        parts = partition.shards(y, num_clients, 2, seed=seed)
    elif skew == "quantity":
        parts = partition.dirichlet_quantity(len(y), num_clients, beta, seed=seed)
        big = int(np.argmax([len(p) for p in parts]))
        for k, p in enumerate(parts):  # a local train/test split needs 2 samples: lend from the largest
            if len(p) < 2:
                parts[k], parts[big] = np.concatenate([p, parts[big][:2 - len(p)]]), parts[big][2 - len(p):]
    else:
        parts = partition.iid(y, num_clients, seed=seed)
    x, x_test = train_set.x, test_set.x
    if skew in ("feature", "mixed"):
        if x.shape[1] != 1:
            raise ValueError(f"FedCMNIST colors gray images; {dataset} has {x.shape[1]} channels")
        rng = np.random.default_rng([seed, 2024])
        hues = np.zeros(len(y))
        for part in parts:
            hues[part] = _palette_hues(rng, *TRAIN_HUES, y[part], spurious)
        x = colorize(x, torch.as_tensor(hues), dataset=dataset)
        yt = test_set.y.numpy()
        test_hues = np.zeros(len(yt))
        for part in partition.iid(yt, num_test_clients, seed=seed + 1):
            test_hues[part] = _palette_hues(rng, *TEST_HUES, yt[part], spurious)
        x_test = colorize(x_test, torch.as_tensor(test_hues), dataset=dataset)
    tr, te = partition.split_train_test(parts, test_fraction, seed=seed)
    return FederatedData(x, train_set.y, tr, te, x_test, test_set.y,
                         source=getattr(train_set, "source", "unknown"))


# The GMA paper's client settings (sec. 5.1, Table 1): LeNet, SGD with momentum 0.9, one local
# epoch, 10 clients per round. It tunes the learning rates per algorithm and does not print the
# winners, nor the batch size or number of rounds; these are ours.
GMA_SETTINGS = {"local_epochs": 1, "momentum": 0.9, "lr": 0.05, "batch_size": 32, "tau": 0.4}


def last_rounds_mean(history: list[dict], rounds: int, last: int = 10) -> float | None:
    """The paper's metric: mean global test accuracy over the evaluations of the last ``last`` rounds."""
    accs = [h["global_acc"] for h in history if h.get("global_acc") is not None and h["round"] > rounds - last]
    return float(np.mean(accs)) if accs else None


def run(dataset: str, skew: str, num_clients: int, method: str, *, seed: int, aggregation: str = "mean",
        server_opt: str = "sgd", out_root=None, fed: FederatedData | None = None, progress: bool = True,
        **config) -> dict:
    """Run, resume or reload one (dataset, skew, clients, method, aggregation, seed) cell.

    10 clients per round as in the paper; ``config`` overrides ``GMA_SETTINGS`` and other
    FedConfig fields. Returns ``Simulation.results()`` plus ``best_global_acc`` and
    ``last10_global_acc`` (the mean over evaluations in the last 10 rounds, the paper's metric).
    """
    from pathlib import Path
    from .experiments import run_key
    from .simulate import FedConfig, Simulation, finished_results
    fed = gma_data(dataset, skew, num_clients, seed=seed) if fed is None else fed
    settings = {**GMA_SETTINGS, "client_fraction": min(1.0, 10 / num_clients), **config}
    cfg = FedConfig(method=method, seed=seed, aggregation=aggregation, server_opt=server_opt, **settings)
    model = "lenet5_rgb" if fed.x.shape[1] == 3 and dataset != "cifar10" else (
        "lenet5_cifar" if dataset == "cifar10" else "lenet5")
    out = None
    if out_root is not None:
        out = Path(out_root) / (f"{dataset}-{skew}{num_clients}-{method}-{server_opt}-{aggregation}-seed{seed}-"
                                f"{run_key(cfg, fed)}")
        done = finished_results(out, cfg.rounds)
        if done is not None:
            return _with_accuracy_summary(done, cfg.rounds)
    sim = Simulation(model, fed, cfg, out_dir=out, progress=progress)
    sim.run()
    return _with_accuracy_summary(sim.results(), cfg.rounds)


def _with_accuracy_summary(res: dict, rounds: int) -> dict:
    """Add best_global_acc and last10_global_acc, both read off the run's history."""
    accs = [h["global_acc"] for h in res["history"] if h.get("global_acc") is not None]
    res["best_global_acc"] = max(accs) if accs else None
    res["last10_global_acc"] = last_rounds_mean(res["history"], rounds)
    return res
