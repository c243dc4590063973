"""The Flower app that ``flwr run flower_app`` launches (``flower_app/pyproject.toml`` names these two objects).

Both sides build the same experiment from the run config (``[tool.flwr.app.config]``, overridden
with ``flwr run ... --run-config "method='fedopt' settings='{\\"aggregation\\": \\"gma\\"}'"``):
a dataset split into ``num-clients`` shards (McMahan et al.'s non-iid split, ``shards-per-client``
classes each), a model and one fltutor method with its settings. Each SuperNode serves the
partition of its ``node_config["partition-id"]``; start one SuperNode per client.

The ServerApp writes the run's history and final accuracy to ``<out-dir>/flower_result.json``
(atomically) when ``out-dir`` is set.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import torch

from . import __version__, data as fdata, partition
from .checks import SettingError
from .checkpoint import atomic_write_json
from .engine import client_accuracy, resolve_device
from .flower import Context, Grid, MethodStrategy, ServerApp, Task, flower_strategy, make_client_app, run_strategies

__all__ = ["task_from_config", "client_app", "server_app", "DEFAULTS"]

# the run config's keys and defaults (flower_app/pyproject.toml repeats them)
DEFAULTS = {"dataset": "mnist", "model": "mlp", "method": "fedavg", "settings": "{}", "num-clients": 10,
            "shards-per-client": 2, "test-fraction": 0.2, "rounds": 3, "client-fraction": 0.5, "local-epochs": 1,
            "batch-size": 10, "lr": 0.05, "seed": 0, "flower-strategy": False, "evaluate": True, "out-dir": ""}

_CACHE: dict = {}


def task_from_config(run_config: dict) -> Task:
    """The experiment a run config describes (the same on the server and on every client)."""
    unknown = sorted(set(run_config) - set(DEFAULTS))
    if unknown:
        raise SettingError(f"run config: unknown key(s) {unknown}; the keys are {sorted(DEFAULTS)}")
    cfg = {**DEFAULTS, **run_config}
    try:
        extra = json.loads(cfg["settings"])
    except ValueError as err:
        raise SettingError(f"settings: {cfg['settings']!r} is not JSON ({err}); give a JSON object, e.g. "
                           "'{\"aggregation\": \"gma\", \"server_lr\": 1.5}'") from None
    if not isinstance(extra, dict):
        raise SettingError(f"settings: {cfg['settings']!r} must be a JSON object of method settings")
    key = json.dumps({k: v for k, v in cfg.items() if k not in ("evaluate", "out-dir", "flower-strategy")}, sort_keys=True)
    if key not in _CACHE:
        train = fdata.load(cfg["dataset"], train=True)
        test = fdata.load(cfg["dataset"], train=False)
        seed = int(cfg["seed"])
        parts = partition.shards(train.y.numpy(), int(cfg["num-clients"]), int(cfg["shards-per-client"]), seed=seed)
        tr, te = partition.split_train_test(parts, float(cfg["test-fraction"]), seed=seed)
        data = fdata.FederatedData(train.x, train.y, tr, te, test.x, test.y, source=train.source)
        settings = {"rounds": int(cfg["rounds"]), "client_fraction": float(cfg["client-fraction"]),
                    "local_epochs": int(cfg["local-epochs"]), "batch_size": int(cfg["batch-size"]),
                    "lr": float(cfg["lr"]), "seed": seed, **extra}
        _CACHE[key] = Task(str(cfg["model"]), data, str(cfg["method"]), settings)
    return _CACHE[key]


client_app = make_client_app(lambda context: {"main": task_from_config(dict(context.run_config))})
server_app = ServerApp()


@server_app.main()
def _main(grid: Grid, context: Context) -> None:
    cfg = {**DEFAULTS, **dict(context.run_config)}
    task = task_from_config(dict(context.run_config))
    strategy = flower_strategy(task) if cfg["flower-strategy"] else MethodStrategy(task, evaluate=bool(cfg["evaluate"]))
    t0 = time.time()
    out = run_strategies(grid, [strategy])["main"]
    if cfg["out-dir"]:
        params = out["params"]
        net, _ = task.initial(task.new_method())
        dev = resolve_device(task.device)
        x, y = task.data.x_test.to(dev, task.dtype), task.data.y_test.to(dev)
        acc = float(client_accuracy(net, params, x, y, [torch.arange(len(y), device=dev)], per_client=False)[0])
        atomic_write_json(Path(cfg["out-dir"]) / "flower_result.json", {
            "method": task.method, "strategy": type(strategy).__name__, "rounds": task.config.rounds,
            "num_clients": task.num_clients, "global_acc": acc, "wall_s": round(time.time() - t0, 2),
            "history": getattr(strategy, "history", []), "fltutor": __version__,
            "param_checksum": float(sum(float(v.double().sum()) for v in params.values())),
            "data_source": task.data.source, "cohorts": [np.asarray(strategy.cohort(r + 1)).tolist()
                                                         for r in range(task.config.rounds)]})
