"""The federated round loop: sample a cohort, train it locally, aggregate, evaluate.

Every random choice is derived from ``(seed, round, client)`` rather than from generator
state, so a run resumed from a checkpoint equals an uninterrupted one, and the cohort
engine (``engine="cohort"``) equals the per-client loop (``engine="loop"``).
"""
from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import torch
from torch import nn, Tensor
from tqdm.auto import tqdm

from . import aggregators
from .client import (Params, client_generator, evaluate, get_params, stack_params, train_client,
                     train_cohort, train_pfedme_cohort, unstack_params)
from .models import make_model
from .data import FederatedData, make_federated

__all__ = ["FedConfig", "FederatedData", "make_federated", "Simulation", "METHODS", "FACTORIZED_METHODS",
           "atomic_write_json", "finished_results", "personal_keys"]

METHODS = ("fedavg", "fedprox", "qffl", "local", "scaffold", "fedper", "pfedme")
# run by fltutor.factorized.FactorizedSimulation (weight-factorization WAFFLe and its L1 ablation)
FACTORIZED_METHODS = ("ibp", "l1")
AGGREGATIONS = ("mean", "gma", "and")


@dataclass
class FedConfig:
    """Settings of one federated run; defaults are WAFFLe section IV-A (MNIST)."""
    method: str = "fedavg"        # one of METHODS
    rounds: int = 100             # T
    client_fraction: float = 0.1  # C
    local_epochs: int = 5         # E
    batch_size: int = 10          # B
    lr: float = 0.04
    momentum: float = 0.0
    weight_decay: float = 0.0
    mu: float = 1.0               # FedProx proximal weight
    q: float = 0.001              # q-FFL fairness exponent
    eval_every: int = 1
    seed: int = 0
    engine: str = "cohort"        # "cohort" (batched) or "loop" (per-client reference)
    # server side (Reddi et al. 2021; GMA, Tenison et al. 2023); the defaults are plain FedAvg
    server_opt: str = "sgd"       # sgd, adagrad, adam, yogi
    server_lr: float = 1.0        # eta_g
    aggregation: str = "mean"     # mean, gma (soft mask) or and (binary AND-mask)
    tau: float = 0.4              # mask threshold
    beta1: float = 0.9
    beta2: float = 0.99
    server_eps: float = 1e-3
    # personalization baselines of WAFFLe's Table 5
    personal_layers: int = 1      # FedPer (Arivazhagan et al. 2019): last layers kept on the client
    pfedme_lambda: float = 15.0   # pFedMe (Dinh et al. 2020): Moreau-envelope weight
    pfedme_steps: int = 5         # K inner steps for the personalized model per mini-batch
    pfedme_lr: float = 0.1        # personal learning rate of the inner problem
    pfedme_beta: float = 1.0      # server mixing: w <- (1 - beta) w + beta mean(w_i)
    # weight-factorization WAFFLe (methods "ibp" and "l1", see fltutor.factorized)
    num_factors: Optional[int] = None  # F for every factorized layer; None: the paper's per model
    alpha_ratio: float = 0.8      # IBP alpha = alpha_ratio * F per layer (the paper reports alpha / F)
    temperature: float = 2 / 3    # concrete relaxation of b (not given in the paper)
    l1_weight: float = 1.0        # method "l1": weight of the L1 penalty on the factor scores
    selection_lr: Optional[float] = None  # SGD rate of the private selection parameters; None: lr
    kl_weight: float = 1.0        # method "ibp": weight of the IBP KL (1: the ELBO; 0: data term only)
    selection_optimizer: str = "sgd"  # optimizer of the private selections: "sgd" or "adam"

    def __post_init__(self):
        if self.method not in METHODS + FACTORIZED_METHODS:
            raise ValueError(f"method {self.method!r} is unknown; choose one of {METHODS + FACTORIZED_METHODS}")
        if self.aggregation not in AGGREGATIONS:
            raise ValueError(f"aggregation {self.aggregation!r} is unknown; choose one of {AGGREGATIONS}")
        aggregators.ServerOptimizer(self.server_opt, self.server_lr)  # validates both
        if not 0 <= self.tau <= 1:
            raise ValueError(f"tau must be in [0, 1], got {self.tau}; the GMA paper uses 0.4")
        if self.method in ("qffl", "local") and not self.plain_server:
            raise ValueError(f"method {self.method!r} has its own server rule; leave server_opt='sgd', "
                             "server_lr=1 and aggregation='mean'")
        if self.engine not in ("cohort", "loop"):
            raise ValueError(f"engine {self.engine!r} is unknown; choose 'cohort' or 'loop'")
        if not (0 < self.client_fraction <= 1):
            raise ValueError(f"client_fraction must be in (0, 1], got {self.client_fraction}; "
                             "WAFFLe samples 0.1 of the clients per round")
        for name in ("rounds", "local_epochs", "batch_size", "eval_every"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if self.method in ("fedper", "pfedme") + FACTORIZED_METHODS and not self.plain_server:
            raise ValueError(f"method {self.method!r} is defined with plain averaging; leave server_opt='sgd', "
                             "server_lr=1 and aggregation='mean'")
        if not (isinstance(self.personal_layers, int) and self.personal_layers >= 1):
            raise ValueError(f"personal_layers must be an integer >= 1, got {self.personal_layers!r}")
        if not (isinstance(self.pfedme_steps, int) and self.pfedme_steps >= 1) or self.pfedme_lambda <= 0 \
                or self.pfedme_lr <= 0 or not 0 < self.pfedme_beta <= 2:
            raise ValueError("pFedMe needs pfedme_steps >= 1, pfedme_lambda > 0, pfedme_lr > 0 and "
                             f"0 < pfedme_beta <= 2; got {self.pfedme_steps}, {self.pfedme_lambda}, "
                             f"{self.pfedme_lr}, {self.pfedme_beta} (Dinh et al. use 5, 15, 0.1, 1)")
        if self.num_factors is not None and not (isinstance(self.num_factors, int) and self.num_factors >= 1):
            raise ValueError(f"num_factors must be None (the paper's F) or an integer >= 1, got {self.num_factors!r}")
        if self.selection_lr is not None and not self.selection_lr > 0:
            raise ValueError(f"selection_lr must be None (use lr) or > 0, got {self.selection_lr}")
        if self.selection_optimizer not in ("sgd", "adam"):
            raise ValueError(f"selection_optimizer must be 'sgd' or 'adam', got {self.selection_optimizer!r}")
        if not self.kl_weight >= 0:
            raise ValueError(f"kl_weight must be >= 0 (1 is the ELBO of eq. 11), got {self.kl_weight}")
        if not (self.alpha_ratio > 0 and self.temperature > 0 and self.l1_weight >= 0):
            raise ValueError(f"need alpha_ratio > 0, temperature > 0 and l1_weight >= 0, got {self.alpha_ratio}, "
                             f"{self.temperature}, {self.l1_weight}; the paper's Table 9 uses alpha/F in 0.4..1")
        if self.mu < 0 or self.q < 0:
            raise ValueError(f"mu and q must be >= 0, got mu={self.mu}, q={self.q}")


    @property
    def plain_server(self) -> bool:
        """True when the server step is FedAvg's plain weighted average."""
        return self.server_opt == "sgd" and self.server_lr == 1.0 and self.aggregation == "mean"


def personal_keys(model: nn.Module, num_layers: int) -> list[str]:
    """Parameter names of the last ``num_layers`` layers that have parameters (FedPer's head)."""
    layers: list[str] = []
    for name, _ in model.named_parameters():
        layer = name.rsplit(".", 1)[0]
        if layer not in layers:
            layers.append(layer)
    if num_layers >= len(layers):
        raise ValueError(f"FedPer: personal_layers={num_layers} would keep all {len(layers)} layers "
                         f"({layers}) on the clients, which is Local-only; use at most {len(layers) - 1}")
    keep = set(layers[-num_layers:])
    return [name for name, _ in model.named_parameters() if name.rsplit(".", 1)[0] in keep]


def atomic_write_json(path: str | os.PathLike, obj) -> None:
    """Write JSON so that readers see the old file or the new one, never half of one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(obj, f, indent=1)
    os.replace(tmp, path)


def finished_results(out_dir, rounds: int) -> dict | None:
    """The results.json of a run folder that already finished ``rounds`` rounds, else None.

    Table cells are keyed by their settings (the folder name), so a finished folder can be
    reloaded instead of retrained; a partial one is resumed from its checkpoint instead.
    """
    if out_dir is None:
        return None
    path = Path(out_dir) / "results.json"
    if not path.exists():
        return None
    done = json.loads(path.read_text())
    return done if done.get("rounds_done") == rounds else None


def _atomic_torch_save(path: Path, obj) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    os.close(fd)
    torch.save(obj, tmp)
    os.replace(tmp, path)


def run_rounds(runner, rounds: int | None, postfix) -> list[dict]:
    """The round loop shared by ``Simulation`` and ``personalized.PersonalizedRun``.

    ``runner`` has ``config.rounds``, ``round``, ``run_round()``, ``out_dir``,
    ``checkpoint_every``, ``save_checkpoint()``, ``progress`` and ``history``. Runs until
    ``rounds`` (default: config.rounds) are done, with a progress bar whose postfix is
    ``postfix(entry)``, checkpointing every ``checkpoint_every`` rounds and at the end.
    """
    target = runner.config.rounds if rounds is None else rounds
    if target > runner.config.rounds:
        raise ValueError(f"run: asked for {target} rounds but the config has rounds={runner.config.rounds}; "
                         "raise config.rounds")
    bar = tqdm(total=target, initial=runner.round, desc=f"{runner.config.method}", disable=not runner.progress,
               unit="round")
    while runner.round < target:
        entry = runner.run_round()
        bar.set_postfix(postfix(entry))
        bar.update(1)
        if runner.out_dir is not None and (runner.round % runner.checkpoint_every == 0 or runner.round == target):
            runner.save_checkpoint()
    bar.close()
    return runner.history


class Simulation:
    """One federated run with its state: global model, per-client state, history.

    With ``out_dir`` it checkpoints every ``checkpoint_every`` rounds and at the end, writes
    ``results.json``, and resumes from ``out_dir/checkpoint.pt`` when one is there.
    """

    def __init__(self, model: nn.Module | str, data: FederatedData, config: FedConfig, *,
                 out_dir: str | os.PathLike | None = None, checkpoint_every: int = 10,
                 progress: bool = True):
        self.model = make_model(model, seed=config.seed) if isinstance(model, str) else copy.deepcopy(model)
        self.model_name = model if isinstance(model, str) else type(model).__name__
        self.data, self.config = data, config
        self.out_dir = None if out_dir is None else Path(out_dir)
        self.checkpoint_every, self.progress = checkpoint_every, progress
        self.round = 0
        self.history: list[dict] = []
        self.global_params: Params = get_params(self.model)
        # client-private state, (N, ...) per tensor: Local-only's models, FedPer's heads,
        # pFedMe's personalized models
        self.personal_keys = personal_keys(self.model, config.personal_layers) if config.method == "fedper" else []
        self.client_params: Params | None = None
        if config.method in ("local", "pfedme"):
            self.client_params = stack_params(self.global_params, data.num_clients)
        elif config.method == "fedper":
            self.client_params = stack_params({k: self.global_params[k] for k in self.personal_keys},
                                              data.num_clients)
        self.server = aggregators.ServerOptimizer(config.server_opt, config.server_lr, beta1=config.beta1,
                                                  beta2=config.beta2, eps=config.server_eps)
        # SCAFFOLD control variates: the server's c and every client's c_i, (N, ...) per tensor
        self.control: Params | None = None
        self.client_control: Params | None = None
        if config.method == "scaffold":
            self.control = {k: torch.zeros_like(v) for k, v in self.global_params.items()}
            self.client_control = stack_params(self.control, data.num_clients)
        self._test_idx = np.concatenate(data.test)  # (sum n_test,)
        self._test_owner = torch.as_tensor(np.repeat(np.arange(data.num_clients), [len(t) for t in data.test]))
        if self.out_dir is not None and (self.out_dir / "checkpoint.pt").exists():
            self.load_checkpoint(self.out_dir / "checkpoint.pt")

    # ---- the round -------------------------------------------------------------------
    def sample_clients(self, round_: int) -> np.ndarray:
        """The cohort of round ``round_`` (0-based): a fraction of clients without replacement."""
        n = self.data.num_clients
        m = max(1, int(round(self.config.client_fraction * n)))
        rng = np.random.default_rng([self.config.seed, round_])
        return np.sort(rng.choice(n, size=m, replace=False))

    def _train(self, start: Params, cohort: np.ndarray, round_: int,
               correction: Params | None = None) -> tuple[Params, Tensor]:
        """Local training of the cohort from stacked start params (C, ...)."""
        cfg = self.config
        idx = [torch.as_tensor(self.data.train[k]) for k in cohort]
        gens = [client_generator(cfg.seed, round_, int(k)) for k in cohort]
        kw = dict(local_epochs=cfg.local_epochs, batch_size=cfg.batch_size, lr=cfg.lr,
                  momentum=cfg.momentum, weight_decay=cfg.weight_decay,
                  prox_mu=cfg.mu if cfg.method == "fedprox" else 0.0)
        if cfg.engine == "cohort":
            return train_cohort(self.model, start, self.data.x, self.data.y, idx, generators=gens,
                                correction=correction, **kw)
        outs = [train_client(self.model, unstack_params(start, c), self.data.x[i], self.data.y[i], generator=g,
                             correction=None if correction is None else unstack_params(correction, c), **kw)
                for c, (i, g) in enumerate(zip(idx, gens))]
        stacked = {k: torch.stack([o[0][k] for o in outs]) for k in start}
        return stacked, torch.tensor([o[1] for o in outs])

    def _train_pfedme(self, start: Params, cohort: np.ndarray, round_: int) -> tuple[Params, Params, Tensor]:
        cfg = self.config
        idx = [torch.as_tensor(self.data.train[k]) for k in cohort]
        gens = [client_generator(cfg.seed, round_, int(k)) for k in cohort]
        return train_pfedme_cohort(self.model, start, self.data.x, self.data.y, idx, generators=gens,
                                   local_epochs=cfg.local_epochs, batch_size=cfg.batch_size, lr=cfg.lr,
                                   personal_lr=cfg.pfedme_lr, lam=cfg.pfedme_lambda,
                                   inner_steps=cfg.pfedme_steps)

    def _start_losses(self, cohort: np.ndarray) -> Tensor:
        """Each cohort client's mean training loss under the current global model (C,)."""
        losses = []
        for k in cohort:
            i = torch.as_tensor(self.data.train[k])
            losses.append(evaluate(self.model, self.global_params, self.data.x[i], self.data.y[i])[1].mean())
        return torch.stack(losses).double()

    def run_round(self) -> dict:
        """Advance one round; returns its history entry."""
        cfg, r = self.config, self.round
        cohort = self.sample_clients(r)
        C = len(cohort)
        rows = torch.as_tensor(cohort)
        if cfg.method == "local":
            start = {k: v[rows] for k, v in self.client_params.items()}
        else:
            start = stack_params(self.global_params, C)
        if cfg.method == "fedper":  # the client's own head on top of the shared base
            start.update({k: self.client_params[k][rows] for k in self.personal_keys})
        start_losses = self._start_losses(cohort) if cfg.method == "qffl" else None
        correction = None
        if cfg.method == "scaffold":  # every local step uses g - c_i + c
            correction = {k: self.control[k].unsqueeze(0) - self.client_control[k][rows] for k in self.control}
        if cfg.method == "pfedme":
            trained, personal, train_loss = self._train_pfedme(start, cohort, r)
            for k, v in personal.items():
                self.client_params[k][rows] = v
        else:
            trained, train_loss = self._train(start, cohort, r, correction)
        n = torch.tensor([len(self.data.train[k]) for k in cohort], dtype=torch.float64)
        if cfg.method == "local":
            for k, v in trained.items():
                self.client_params[k][rows] = v
        elif cfg.method == "fedper":  # heads stay home; only the base is averaged
            for k in self.personal_keys:
                self.client_params[k][rows] = trained[k]
            base = aggregators.fedavg(self.global_params, {k: v for k, v in trained.items()
                                                           if k not in self.personal_keys}, n)
            self.global_params = {**self.global_params, **base}
        elif cfg.method == "pfedme":  # w <- (1 - beta) w + beta * mean(w_i)
            avg = aggregators.fedavg(self.global_params, trained, n)
            b = cfg.pfedme_beta
            self.global_params = {k: (1 - b) * self.global_params[k] + b * avg[k] for k in avg}
        elif cfg.method == "qffl":
            self.global_params = aggregators.qffl(self.global_params, trained, start_losses, lr=cfg.lr, q=cfg.q)
        elif cfg.plain_server and cfg.method != "scaffold":  # FedAvg; FedProx changes only the client side
            self.global_params = aggregators.fedavg(self.global_params, trained, n)
        else:
            self._server_step(trained, n, cohort)
        self.round += 1
        entry = {"round": self.round, "clients": cohort.tolist(), "train_loss": float(train_loss.mean())}
        if self.round % cfg.eval_every == 0 or self.round == cfg.rounds:
            entry.update(self.evaluate())
        self.history.append(entry)
        return entry

    def _server_step(self, trained: Params, n: Tensor, cohort: np.ndarray) -> None:
        """Pseudo-gradient, optional GMA/AND mask, server optimizer; SCAFFOLD's control variates.

        Delta = sum_n s_n/sum(s) (w_n - w) (GMA Alg. 2); the mask is computed from the
        clients' unweighted updates (a positive weight leaves signs alone, so each client has
        one vote) and multiplies the server optimizer's final step.
        """
        cfg = self.config
        updates = {k: v - self.global_params[k].unsqueeze(0) for k, v in trained.items()}  # (C, ...)
        delta = aggregators.weighted_mean(updates, n)
        mask = None
        if cfg.aggregation != "mean":
            fn = aggregators.gma_mask if cfg.aggregation == "gma" else aggregators.and_mask
            mask = {k: fn(u, cfg.tau) for k, u in updates.items()}
        self.global_params = self.server.step(self.global_params, delta, mask)
        if cfg.method == "scaffold":  # option II: c_i+ = c_i - c + (x - y_i) / (K lr)
            rows = torch.as_tensor(cohort)
            steps = torch.tensor([-(-len(self.data.train[k]) // cfg.batch_size) * cfg.local_epochs
                                  for k in cohort], dtype=torch.float64)
            n_all = self.data.num_clients
            for k, u in updates.items():
                scale = (steps * cfg.lr).to(u.dtype).view(-1, *([1] * (u.ndim - 1)))
                c_plus = self.client_control[k][rows] - self.control[k].unsqueeze(0) - u / scale
                self.control[k] = self.control[k] + (c_plus - self.client_control[k][rows]).sum(0) / n_all
                self.client_control[k][rows] = c_plus

    # ---- evaluation ----------------------------------------------------------------
    def local_accuracy(self) -> np.ndarray:
        """Accuracy (%) of every client's model on its own local test set, shape (N,)."""
        d = self.data
        if self.client_params is None:  # one global model: a single pass over all local test sets
            correct, _ = evaluate(self.model, self.global_params, d.x[self._test_idx], d.y[self._test_idx])
            hits = torch.bincount(self._test_owner, weights=correct.double(), minlength=d.num_clients)
        else:
            hits = torch.tensor([evaluate(self.model, self.client_model(k), d.x[t], d.y[t])[0].sum().item()
                                 for k, t in enumerate(d.test)], dtype=torch.float64)
        sizes = torch.tensor([len(t) for t in d.test], dtype=torch.float64)
        return (100.0 * hits / sizes).numpy()

    def client_model(self, k: int) -> Params:
        """The parameters client ``k`` evaluates with: its own model, or the global one plus its head."""
        if self.client_params is None:
            return self.global_params
        own = unstack_params(self.client_params, k)
        return {**self.global_params, **own} if self.config.method == "fedper" else own

    def global_accuracy(self) -> float | None:
        """Accuracy (%) of the global model on the dataset's test split (None for Local-only and FedPer)."""
        if self.data.x_test is None or self.config.method in ("local", "fedper"):
            return None
        correct, _ = evaluate(self.model, self.global_params, self.data.x_test, self.data.y_test)
        return 100.0 * correct.double().mean().item()

    def evaluate(self) -> dict:
        acc = self.local_accuracy()
        return {"local_acc": float(acc.mean()), "local_acc_per_client": [round(float(a), 4) for a in acc],
                "global_acc": self.global_accuracy()}

    # ---- running, checkpoints, results ---------------------------------------------
    def run(self, rounds: int | None = None) -> list[dict]:
        """Run until ``rounds`` (default: config.rounds) rounds are done; returns the history."""
        return run_rounds(self, rounds, lambda e: {"local_acc": f"{e['local_acc']:.2f}"} if "local_acc" in e else {})

    def _state(self) -> dict:
        return {"config": dataclasses.asdict(self.config), "model": self.model_name,
                "data": self.data.fingerprint, "round": self.round, "global_params": self.global_params,
                "client_params": self.client_params, "history": self.history,
                "server": self.server.state_dict(), "control": self.control,
                "client_control": self.client_control}

    def save_checkpoint(self) -> None:
        """Atomically write checkpoint.pt and results.json into out_dir."""
        if self.out_dir is None:
            raise ValueError("save_checkpoint: this Simulation has no out_dir; pass out_dir=... to create it")
        self.out_dir.mkdir(parents=True, exist_ok=True)
        _atomic_torch_save(self.out_dir / "checkpoint.pt", self._state())
        atomic_write_json(self.out_dir / "results.json", self.results())

    def load_checkpoint(self, path: str | os.PathLike) -> None:
        """Resume from a checkpoint made with the same config, model and data."""
        state = torch.load(path, weights_only=False)
        mine = dataclasses.asdict(self.config)
        defaults = dataclasses.asdict(FedConfig())  # a field added after the checkpoint was made had its default
        saved = {k: state["config"].get(k, defaults[k]) for k in mine}
        diff = {k: (saved[k], v) for k, v in mine.items() if k not in ("rounds", "engine", "eval_every") and saved[k] != v}
        if diff or state["model"] != self.model_name or state["data"] != self.data.fingerprint:
            what = ", ".join(f"{k}: {a!r} there vs {b!r} here" for k, (a, b) in diff.items()) or "model or data"
            raise ValueError(f"checkpoint {path} was made by a different run ({what}); "
                             "use a fresh out_dir or delete the checkpoint to start over")
        self.round, self.history = state["round"], state["history"]
        self.global_params, self.client_params = state["global_params"], state["client_params"]
        if "server" in state:
            self.server.load_state_dict(state["server"])
            self.control, self.client_control = state["control"], state["client_control"]
        self._restore(state)

    def _restore(self, state: dict) -> None:
        """Hook for subclasses with more state in the checkpoint (called by load_checkpoint)."""

    def results(self) -> dict:
        """Everything worth keeping as JSON: config, final accuracies, history."""
        last = next((h for h in reversed(self.history) if "local_acc" in h), {})
        return {"config": dataclasses.asdict(self.config), "model": self.model_name,
                "data_fingerprint": self.data.fingerprint, "rounds_done": self.round,
                "groups": None if self.data.groups is None else self.data.groups.tolist(),
                "group_names": list(self.data.group_names),
                "final": {k: last.get(k) for k in ("local_acc", "global_acc", "local_acc_per_client")},
                "history": self.history}
