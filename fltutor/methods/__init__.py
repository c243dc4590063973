"""Federated methods as plug-ins: one small file each, and a registry from name to method.

``get(name)`` returns ``(method class, default overrides)``; a name can be an alias that
presets a parameter (``fedprox`` is FedAvg with mu = 1, ``fedadam`` is FedOpt with Adam on the
server). To add a method: write ``fltutor/methods/<name>.py`` with a ``Method`` subclass and
its parameters dataclass, add one line to ``REGISTRY`` below, and a sibling test
``tests/methods/test_<name>.py`` that checks it against a per-client loop or hand-computed
numbers. The README walks through an example.
"""
from __future__ import annotations

import importlib

from .base import EvalModel, Job, Method, Round, RunConfig

__all__ = ["REGISTRY", "names", "get", "Method", "Job", "Round", "EvalModel", "RunConfig"]

# name: (module, class, parameter defaults that the name presets)
REGISTRY: dict[str, tuple[str, str, dict]] = {
    "fedavg": ("fedavg", "FedAvg", {}),
    "fedprox": ("fedavg", "FedAvg", {"mu": 1.0}),
    "fedavgm": ("fedavgm", "FedAvgM", {}),
    "dp_fedavg": ("dp_fedavg", "DPFedAvg", {}),
    "qffl": ("qffl", "QFFL", {}),
    "fedopt": ("fedopt", "FedOpt", {}),
    # an adaptive server steps by up to ~server_lr per coordinate wherever the update outgrows eps (m / (sqrt(v) +
    # eps)), so FedAvg's rate 1 would move weights by ~0.5 in round one; Reddi et al. tune it per task, well below 1
    "fedadagrad": ("fedopt", "FedOpt", {"server_opt": "adagrad", "server_lr": 0.01}),
    "fedadam": ("fedopt", "FedOpt", {"server_opt": "adam", "server_lr": 0.01}),
    "fedyogi": ("fedopt", "FedOpt", {"server_opt": "yogi", "server_lr": 0.01}),
    "scaffold": ("scaffold", "Scaffold", {}),
    "local": ("local", "Local", {}),
    "fedper": ("fedper", "FedPer", {}),
    "pfedme": ("pfedme", "PFedMe", {}),
    "apfl": ("apfl", "APFL", {}),
    "weight_erosion": ("weight_erosion", "WeightErosion", {}),
    "waffle_weighted": ("waffle_weighted", "WaffleWeighted", {}),
    "waffle_ibp": ("waffle_ibp", "WaffleIBP", {}),
    "waffle_ibp_l1": ("waffle_ibp", "WaffleIBP", {"selection": "l1"}),
}


def names() -> list[str]:
    """Every registered method name."""
    return list(REGISTRY)


def get(name: str) -> tuple[type[Method], dict]:
    """The method class registered as ``name`` and the parameter defaults the name presets."""
    if name not in REGISTRY:
        raise ValueError(f"method {name!r} is unknown; choose one of {names()}")
    module, cls, preset = REGISTRY[name]
    return getattr(importlib.import_module(f"{__name__}.{module}"), cls), dict(preset)
