"""Personalized FL for one agent of interest: weighted-averaging WAFFLE and its comparators.

This is the setting of Beaussart et al. 2021 ("WAFFLE: Weighted Averaging for Personalized
Federated Learning", not the IBP-factorization WAFFLe of ``fltutor.layers``): ten agents
all train every round, and the server builds a model for one target agent ("Alice",
agent 0). Methods:

- ``local``: the target trains alone;
- ``fedavg``: one global model, sample-weighted averaging;
- ``scaffold``: SCAFFOLD (Karimireddy et al. 2020) with client and server control
  variates, uniform weights 1/N (the paper's Alg. 2 with alpha_i = 1/N);
- ``weight_erosion``: Weight Erosion (Grimberg et al. 2020), agent weights eroded by their
  distance to the target;
- ``waffle``: SCAFFOLD whose model *and* control-variate updates are combined with the
  distance-based weights of ``aggregators.waffle_weights``, averaged over three rounds;
- ``apfl``: APFL (Deng et al. 2020), a global model plus a local model per agent, mixed
  with an adaptive alpha.

``targets`` lists the agents that get a personalized model. The paper uses ``(0,)``;
``tuple(range(10))`` trains every agent's model at once with the cohort engine.
"""
from __future__ import annotations

import copy
import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn, Tensor

from . import aggregators
from . import data as fdata
from . import partition
from .client import (Params, client_generator, cohort_batches, cohort_forward, evaluate, get_params,
                     stack_params, train_cohort)
from .models import make_model
from .simulate import FederatedData, _atomic_torch_save, atomic_write_json, finished_results, run_rounds

__all__ = ["PERSONAL_METHODS", "DISTRIBUTIONS", "PersonalConfig", "agents_data", "PersonalizedRun",
           "train_apfl_cohort", "run"]

PERSONAL_METHODS = ("local", "fedavg", "scaffold", "weight_erosion", "waffle", "apfl")

# Section 3 and Table 2 of Beaussart et al. 2021: agent 0's class proportions; agent i gets
# the list rotated by i. "*" adds concept shift: every agent but the target permutes labels.
DISTRIBUTIONS = {
    "A": [0.1] * 10,
    "B": [0.25] * 4 + [0.0] * 6,
    "C": [0.0, 0.0, 0.0, 0.1, 0.2, 0.4, 0.2, 0.1, 0.0, 0.0],
    "A*": [0.1] * 10,
    "B*": [0.25] * 4 + [0.0] * 6,
}

# Table 3: Weight Erosion's distance penalty p_d on MNIST, per distribution.
WE_PENALTY_MNIST = {"A": 0.006, "B": 0.0067, "C": 0.006, "A*": 0.0088, "B*": 0.0088}


@dataclass
class PersonalConfig:
    """One personalized run. Defaults follow the paper's MNIST setup (sec. 3)."""
    method: str = "waffle"
    rounds: int = 100               # R
    local_epochs: int = 1           # local passes per round (the paper's K steps = one epoch)
    batch_size: int = 32
    lr: float = 0.1                 # eta_l
    momentum: float = 0.0
    weight_decay: float = 0.0
    server_lr: float = 1.0          # eta_g
    delta_omega: float = 3.2        # WAFFLE's single hyperparameter
    p_d: float = 0.006              # Weight Erosion's distance penalty
    apfl_alpha: float = 0.25        # APFL's initial mixing weight
    targets: tuple = (0,)
    seed: int = 0

    def __post_init__(self):
        if self.method not in PERSONAL_METHODS:
            raise ValueError(f"method {self.method!r} is unknown; choose one of {PERSONAL_METHODS}")
        for name in ("rounds", "local_epochs", "batch_size"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
        if not (self.lr > 0 and self.server_lr > 0):
            raise ValueError(f"lr and server_lr must be > 0, got {self.lr}, {self.server_lr}")
        if not 0 <= self.apfl_alpha <= 1:
            raise ValueError(f"apfl_alpha must be in [0, 1], got {self.apfl_alpha}")
        self.targets = tuple(int(t) for t in self.targets)
        if not self.targets or len(set(self.targets)) != len(self.targets):
            raise ValueError(f"targets must be distinct agent indices, got {self.targets}; the paper uses (0,)")


def agents_data(dataset: str, distribution: str, *, seed: int, num_agents: int = 10, root=None,
                download: bool = False, train_set=None, test_set=None,
                max_train_per_agent: int | None = None) -> FederatedData:
    """Ten agents' data for distribution A, B, C, A* or B* (Beaussart et al. 2021, sec. 3).

    Both the training split and the dataset's test split are shared out with the same
    rotated class proportions (``partition.label_distribution``), so each agent's local test
    set follows its own distribution. Under concept shift every agent except agent 0 relabels
    its train and test samples with its own random permutation of the classes.
    ``max_train_per_agent`` keeps a random subset of each agent's training samples.
    """
    if distribution not in DISTRIBUTIONS:
        raise ValueError(f"distribution {distribution!r} is unknown; choose one of {list(DISTRIBUTIONS)}")
    train_set = fdata.load(dataset, train=True, root=root, download=download) if train_set is None else train_set
    test_set = fdata.load(dataset, train=False, root=root, download=download) if test_set is None else test_set
    props = DISTRIBUTIONS[distribution]
    tr = partition.label_distribution(train_set.y, num_agents, props, seed=seed)
    te = partition.label_distribution(test_set.y, num_agents, props, seed=seed + 1)
    if max_train_per_agent is not None:
        rng = np.random.default_rng([seed, 7])
        tr = [np.sort(rng.choice(p, size=min(len(p), max_train_per_agent), replace=False)) for p in tr]
    n_train = len(train_set.y)
    x = torch.cat([train_set.x, test_set.x])
    y = torch.cat([train_set.y, test_set.y]).clone()
    te = [p + n_train for p in te]
    if distribution.endswith("*"):
        rng = np.random.default_rng([seed, 99])
        k = int(y.max()) + 1
        for i in range(1, num_agents):  # agent 0, the target, keeps the true labels
            perm = torch.as_tensor(rng.permutation(k))
            for part in (tr[i], te[i]):
                idx = torch.as_tensor(part)
                y[idx] = perm[y[idx]]
    return FederatedData(x, y, tr, te, source=getattr(train_set, "source", "unknown"))


def train_apfl_cohort(model: nn.Module, w: Params, v: Params, alpha: Tensor, x: Tensor, y: Tensor,
                      client_indices, *, local_epochs: int, batch_size: int, lr: float,
                      generators) -> tuple[Params, Params, Tensor]:
    """APFL local training (Deng et al. 2020, Alg. 1) for C clients at once.

    Each step on one mini-batch: w <- w - lr grad f(w); with the mix m = a v + (1 - a) w,
    v <- v - lr d f(m)/dv and a <- a - lr d f(m)/da (the adaptive alpha, clipped to [0, 1]).
    w, v stacked (C, ...); alpha (C,). Returns the new w, v and alpha.
    """
    safe, mask, active, counts, _ = cohort_batches(client_indices, local_epochs, batch_size, generators, x.dtype)
    C, steps = active.shape
    names = list(w)
    pw = [w[k].detach().clone().requires_grad_(True) for k in names]
    pv = [v[k].detach().clone().requires_grad_(True) for k in names]
    a = alpha.detach().clone().to(x.dtype).requires_grad_(True)

    def per_client_loss(params, s):
        logits = cohort_forward(model, dict(zip(names, params)), x[safe[:, s]])
        ce = F.cross_entropy(logits.flatten(0, 1), y[safe[:, s]].flatten(), reduction="none").view(C, -1)
        return ((ce * mask[:, s]).sum(1) / counts[:, s]).sum()

    for s in range(steps):
        gw = torch.autograd.grad(per_client_loss(pw, s), pw)
        shape = lambda t: a.view(C, *([1] * (t.ndim - 1)))  # noqa: E731 (C,) -> (C, 1, ...)
        mixed = [shape(tv) * tv + (1 - shape(tv)) * tw.detach() for tv, tw in zip(pv, pw)]
        grads = torch.autograd.grad(per_client_loss(mixed, s), pv + [a])
        on = active[:, s].to(x.dtype)  # (C,) clients whose data are used up stop moving
        with torch.no_grad():
            for t, g in zip(pw, gw):
                t.sub_(lr * g * on.view(C, *([1] * (t.ndim - 1))))
            for t, g in zip(pv, grads[:-1]):
                t.sub_(lr * g * on.view(C, *([1] * (t.ndim - 1))))
            a.sub_(lr * grads[-1] * on).clamp_(0, 1)
    return ({k: t.detach() for k, t in zip(names, pw)}, {k: t.detach() for k, t in zip(names, pv)},
            a.detach())


def _take(p: Params, rows) -> Params:
    rows = torch.as_tensor(rows, dtype=torch.long)
    return {k: v[rows] for k, v in p.items()}


class PersonalizedRun:
    """One personalized run: state, round loop, evaluation, atomic checkpoints and resume.

    State (all stacked along a leading dimension):
    - ``x``: server models, one per target for local/weight_erosion/waffle, else one;
    - ``c`` (M, ...) and ``ci`` (M*N, ...): SCAFFOLD/WAFFLE server and agent control variates;
    - ``alpha_hist`` (T, 2, N): WAFFLE's weights of the last two rounds;
    - ``we`` (T, N): Weight Erosion's current weights;
    - ``v`` (N, ...), ``apfl_a`` (N,): APFL's local models and mixing weights.
    """

    def __init__(self, model: nn.Module | str, data: FederatedData, config: PersonalConfig, *,
                 out_dir: str | os.PathLike | None = None, checkpoint_every: int = 10,
                 progress: bool = True):
        self.model = make_model(model, seed=config.seed) if isinstance(model, str) else copy.deepcopy(model)
        self.model_name = model if isinstance(model, str) else type(model).__name__
        self.data, self.config = data, config
        n = data.num_clients
        bad = [t for t in config.targets if not 0 <= t < n]
        if bad:
            raise ValueError(f"targets {bad} are not agents of this data (it has {n}); use indices in [0, {n})")
        self.out_dir = None if out_dir is None else Path(out_dir)
        self.checkpoint_every, self.progress = checkpoint_every, progress
        self.round, self.history = 0, []
        m = config.method
        T = len(config.targets)
        x0 = get_params(self.model)
        self.num_models = T if m in ("local", "weight_erosion", "waffle") else 1
        self.state: dict = {"x": stack_params(x0, self.num_models)}
        if m in ("scaffold", "waffle"):
            zero = {k: torch.zeros_like(v) for k, v in x0.items()}
            self.state["c"] = stack_params(zero, self.num_models)
            self.state["ci"] = stack_params(zero, self.num_models * n)
        if m == "waffle":
            self.state["alpha_hist"] = torch.full((T, 2, n), float("nan"), dtype=torch.float64)
        if m == "weight_erosion":
            self.state["we"] = torch.ones(T, n, dtype=torch.float64)
        if m == "apfl":
            self.state["v"] = stack_params(x0, n)
            self.state["apfl_a"] = torch.full((n,), config.apfl_alpha)
        self.sizes = torch.tensor([len(t) for t in data.train], dtype=torch.float64)
        if self.out_dir is not None and (self.out_dir / "checkpoint.pt").exists():
            self.load_checkpoint(self.out_dir / "checkpoint.pt")

    # ---- one round -----------------------------------------------------------------
    def _pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """(model row, agent) of every local training job this round."""
        n, cfg = self.data.num_clients, self.config
        if cfg.method == "local":
            return np.arange(len(cfg.targets)), np.array(cfg.targets)
        rows = np.repeat(np.arange(self.num_models), n)
        return rows, np.tile(np.arange(n), self.num_models)

    def run_round(self) -> dict:
        cfg, st, r = self.config, self.state, self.round + 1  # r is 1-based, as in the paper
        n = self.data.num_clients
        rows, agents = self._pairs()
        idx = [torch.as_tensor(self.data.train[a]) for a in agents]
        gens = [client_generator(cfg.seed, r, int(a)) for a in agents]
        start = _take(st["x"], rows)
        kw = dict(local_epochs=cfg.local_epochs, batch_size=cfg.batch_size, lr=cfg.lr)
        entry: dict = {"round": r}
        if cfg.method == "apfl":
            v, a = _take(st["v"], agents), st["apfl_a"][torch.as_tensor(agents)]
            trained, v, a = train_apfl_cohort(self.model, start, v, a, self.data.x, self.data.y, idx,
                                              generators=gens, **kw)
            st["v"], st["apfl_a"] = v, a
            entry["apfl_alpha"] = [round(float(t), 4) for t in a]
        else:
            corr = None
            if "c" in st:  # SCAFFOLD correction c - c_i for every (model, agent) pair
                corr = {k: st["c"][k][torch.as_tensor(rows)] - st["ci"][k] for k in st["c"]}
            trained, _ = train_cohort(self.model, start, self.data.x, self.data.y, idx, momentum=cfg.momentum,
                                      weight_decay=cfg.weight_decay, correction=corr, generators=gens, **kw)
        delta = {k: trained[k] - start[k] for k in start}  # Delta y_i, (P, ...)
        if cfg.method == "local":
            st["x"] = trained
        elif cfg.method in ("fedavg", "apfl"):
            st["x"] = stack_params(aggregators.weighted_mean(trained, self.sizes), 1)
        else:
            new_ci = None
            if "c" in st:  # c_i+ = c_i - c + (x - y_i) / (K lr), K = that agent's number of steps
                steps = torch.tensor([-(-len(self.data.train[a]) // cfg.batch_size) * cfg.local_epochs
                                      for a in agents], dtype=torch.float64)
                new_ci = {k: st["ci"][k] - st["c"][k][torch.as_tensor(rows)]
                          - delta[k] / (steps.to(delta[k].dtype) * cfg.lr).view(-1, *([1] * (delta[k].ndim - 1)))
                          for k in delta}
            weights = self._weights(delta, r)  # (M, N), rows sum to 1
            entry["weights"] = [[round(float(w), 5) for w in row] for row in weights]
            for k in st["x"]:
                d = delta[k].view(self.num_models, n, *delta[k].shape[1:])
                wk = weights.to(d.dtype).view(self.num_models, n, *([1] * (d.ndim - 2)))
                st["x"][k] = st["x"][k] + cfg.server_lr * (wk * d).sum(1)
                if new_ci is not None:
                    dc = (new_ci[k] - st["ci"][k]).view_as(d)
                    st["c"][k] = st["c"][k] + (wk * dc).sum(1)
            if new_ci is not None:
                st["ci"] = new_ci
        self.round = r
        entry["target_acc"] = [round(float(a), 4) for a in self.target_accuracy()]
        self.history.append(entry)
        return entry

    def _weights(self, delta: Params, r: int) -> Tensor:
        """(M, N) aggregation weights of this round."""
        cfg, n, st = self.config, self.data.num_clients, self.state
        if cfg.method == "scaffold":
            return torch.full((1, n), 1.0 / n, dtype=torch.float64)
        per_model = {k: v.view(self.num_models, n, *v.shape[1:]) for k, v in delta.items()}
        rows = []
        for t, target in enumerate(cfg.targets):
            u = {k: v[t] for k, v in per_model.items()}
            if cfg.method == "weight_erosion":
                st["we"][t] = aggregators.weight_erosion_step(st["we"][t], u, target, r, p_d=cfg.p_d)
                w = st["we"][t] * self.sizes
                rows.append(w / w.sum())
            else:  # waffle: alpha^0 now, averaged with the last two rounds' (Alg. 1 line 10)
                a0 = aggregators.waffle_weights(u, target, r, cfg.rounds, delta_omega=cfg.delta_omega)
                hist = st["alpha_hist"][t]
                known = [h for h in hist if not torch.isnan(h).any()]
                rows.append(torch.stack(known + [a0]).mean(0))
                st["alpha_hist"][t] = torch.stack([hist[1], a0])
        return torch.stack(rows)

    # ---- evaluation ------------------------------------------------------------------
    def personalized_params(self, t: int) -> Params:
        """The model target ``t`` (its position in config.targets) would use now."""
        cfg, st = self.config, self.state
        if cfg.method == "apfl":
            a = float(st["apfl_a"][cfg.targets[t]])
            return {k: a * st["v"][k][cfg.targets[t]] + (1 - a) * st["x"][k][0] for k in st["x"]}
        row = t if self.num_models > 1 else 0
        return {k: v[row] for k, v in st["x"].items()}

    def target_accuracy(self) -> np.ndarray:
        """Accuracy (%) of each target's model on that target's local test set, (T,)."""
        out = []
        for t, target in enumerate(self.config.targets):
            te = self.data.test[target]
            correct, _ = evaluate(self.model, self.personalized_params(t), self.data.x[te], self.data.y[te])
            out.append(100.0 * correct.double().mean().item())
        return np.array(out)

    # ---- running, checkpoints --------------------------------------------------------
    def run(self, rounds: int | None = None) -> list[dict]:
        """Run until ``rounds`` (default: config.rounds) rounds are done; returns the history."""
        return run_rounds(self, rounds, lambda e: {"acc": f"{e['target_acc'][0]:.2f}"})

    def save_checkpoint(self) -> None:
        if self.out_dir is None:
            raise ValueError("save_checkpoint: this run has no out_dir; pass out_dir=... to create it")
        self.out_dir.mkdir(parents=True, exist_ok=True)
        _atomic_torch_save(self.out_dir / "checkpoint.pt",
                           {"config": dataclasses.asdict(self.config), "model": self.model_name,
                            "data": self.data.fingerprint, "round": self.round, "state": self.state,
                            "history": self.history})
        atomic_write_json(self.out_dir / "results.json", self.results())

    def load_checkpoint(self, path) -> None:
        ck = torch.load(path, weights_only=False)
        mine = dataclasses.asdict(self.config)
        diff = [k for k, v in mine.items() if k != "rounds" and ck["config"].get(k) != v]
        if diff or ck["model"] != self.model_name or ck["data"] != self.data.fingerprint:
            raise ValueError(f"checkpoint {path} was made by a different run (differs in "
                             f"{diff or 'model or data'}); use a fresh out_dir or delete the checkpoint")
        self.round, self.state, self.history = ck["round"], ck["state"], ck["history"]

    def results(self) -> dict:
        curves = np.array([h["target_acc"] for h in self.history]) if self.history else np.zeros((0, 1))
        best = curves.max(0).tolist() if len(curves) else None
        return {"config": dataclasses.asdict(self.config), "model": self.model_name,
                "data_fingerprint": self.data.fingerprint, "rounds_done": self.round,
                "best_acc": best, "final_acc": curves[-1].tolist() if len(curves) else None,
                "history": self.history}


def run(dataset: str, distribution: str, method: str, *, seed: int, out_root=None, model: str = "lenet5",
        fed: FederatedData | None = None, progress: bool = True, **config) -> dict:
    """Run, resume or reload one cell of the paper's Table 1; returns ``PersonalizedRun.results()``.

    Weight Erosion's p_d defaults to the paper's Table 3 value for the distribution.
    """
    import hashlib
    import json
    if method == "weight_erosion" and "p_d" not in config:
        config["p_d"] = WE_PENALTY_MNIST[distribution]
    cfg = PersonalConfig(method=method, seed=seed, **config)
    fed = agents_data(dataset, distribution, seed=seed) if fed is None else fed
    out = None
    if out_root is not None:
        settings = {k: v for k, v in dataclasses.asdict(cfg).items() if k not in ("method", "seed")}
        key = hashlib.sha256(json.dumps({"c": settings, "d": fed.fingerprint, "m": model},
                                        sort_keys=True).encode()).hexdigest()[:8]
        out = Path(out_root) / f"{dataset}-{distribution.replace('*', 'star')}-{method}-seed{seed}-{key}"
        done = finished_results(out, cfg.rounds)
        if done is not None:
            return done
    sim = PersonalizedRun(model, fed, cfg, out_dir=out, progress=progress)
    sim.run()
    return sim.results()
