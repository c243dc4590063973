"""The papers' experimental settings as functions: build the federated data, run, resume.

``waffle_data`` builds WAFFLe's unimodal/multimodal splits (Hao et al. 2022, sec. IV-A) and
``run`` executes one (dataset, partition, method, seed) cell of a results table, with its
checkpoint in ``out_root`` so that a rerun resumes or simply reloads a finished cell.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

from . import data as fdata
from . import partition
from .factorized import FactorizedSimulation
from .simulate import FACTORIZED_METHODS, FedConfig, FederatedData, Simulation, finished_results, make_federated

__all__ = ["WAFFLE_SETTINGS", "waffle_data", "run", "run_dir", "run_key"]

# settings that do not change a run's numbers (engine, eval_every) or are in the folder name
_NOT_IN_KEY = ("engine", "eval_every", "method", "seed")
_KEY_IF_SET = ("server_opt", "server_lr", "aggregation", "tau", "beta1", "beta2", "server_eps",
               "personal_layers", "pfedme_lambda", "pfedme_steps", "pfedme_lr", "pfedme_beta",
               "num_factors", "alpha_ratio", "temperature", "l1_weight", "selection_lr",
               "kl_weight", "selection_optimizer")

# WAFFLe section IV-A-2: model and SGD learning rate per dataset (the same for all methods).
WAFFLE_SETTINGS = {
    "mnist": {"model": "mlp", "lr": 0.04},
    "fashionmnist": {"model": "cnn_fashion", "lr": 0.02},
    "cifar10": {"model": "cnn_cifar", "lr": 0.02},
}


def waffle_data(dataset: str, mode: str, *, seed: int, groups=None, shards_per_client: int = 2,
                test_fraction: float = 0.2, root=None, download: bool = False) -> FederatedData:
    """WAFFLe's federated split of ``dataset``: mode 'unimodal' or 'multimodal'.

    ``groups`` defaults to the paper's preset (e.g. MNIST odd 100 / even 20 clients). The
    unimodal split uses the same total number of clients, so the two modes differ only in
    how classes are grouped. The paper does not give the local test fraction; we use 0.2.
    """
    if mode not in ("unimodal", "multimodal"):
        raise ValueError(f"mode must be 'unimodal' or 'multimodal', got {mode!r}")
    key = fdata._canonical(dataset)
    groups = partition.MULTIMODAL_PRESETS[key] if groups is None else [(tuple(c), int(n)) for c, n in groups]
    train = fdata.load(key, train=True, root=root, download=download)
    test = fdata.load(key, train=False, root=root, download=download)
    num_clients = sum(n for _, n in groups)
    if mode == "multimodal":
        parts = partition.multimodal(train.y, groups, shards_per_client, seed=seed)
        gid, names = partition.client_groups(groups), ("majority", "minority")
    else:
        parts = partition.shards(train.y, num_clients, shards_per_client, seed=seed)
        gid, names = None, ()
    fd = make_federated(train, parts, test_fraction=test_fraction, seed=seed, test_set=test,
                        groups=gid, group_names=names)
    return fd


def run_key(cfg: FedConfig, fed: FederatedData) -> str:
    """8 hex digits naming everything that changes a run's numbers except method and seed.

    Server-side settings (added for GMA) enter the key only when they differ from their
    defaults, so runs made before they existed keep their folders.
    """
    defaults = FedConfig()
    settings = {k: v for k, v in dataclasses.asdict(cfg).items() if k not in _NOT_IN_KEY
                and not (k in _KEY_IF_SET and v == getattr(defaults, k))}
    blob = json.dumps({"config": settings, "data": fed.fingerprint}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:8]


def run_dir(out_root, dataset: str, mode: str, cfg: FedConfig, fed: FederatedData) -> Path:
    """Where one table cell keeps its checkpoint and results.json, e.g. mnist-multimodal-fedavg-seed0-1a2b3c4d."""
    return Path(out_root) / f"{dataset}-{mode}-{cfg.method}-seed{cfg.seed}-{run_key(cfg, fed)}"


def run(dataset: str, mode: str, method: str, *, seed: int, out_root=None, model: str | None = None,
        fed: FederatedData | None = None, progress: bool = True, **config) -> dict:
    """Run (or resume, or reload) one cell; returns ``Simulation.results()``.

    ``config`` overrides FedConfig fields (rounds, lr, mu, q, ...); the learning rate and
    model default to WAFFLe's per-dataset settings.
    """
    key = fdata._canonical(dataset)
    settings = WAFFLE_SETTINGS[key]
    cfg = FedConfig(method=method, seed=seed, **{"lr": settings["lr"], **config})
    fed = waffle_data(key, mode, seed=seed) if fed is None else fed
    out = None if out_root is None else run_dir(out_root, key, mode, cfg, fed)
    done = finished_results(out, cfg.rounds)
    if done is not None:
        return done  # finished earlier with these settings (the folder name says which): reuse it
    engine = FactorizedSimulation if method in FACTORIZED_METHODS else Simulation
    sim = engine(model or settings["model"], fed, cfg, out_dir=out, progress=progress)
    sim.run()
    return sim.results()
