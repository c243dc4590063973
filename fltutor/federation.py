"""The one round loop: sample cohorts, train them as one batched job, aggregate, evaluate.

``Federation`` runs one federated run, or a *sweep* of R runs that share a model and a
dataset but differ in seed and in any scalar setting (learning rates, mu, q, tau, KL
weight, ...). A sweep is trained as one batched job: every round, the cohorts of all R runs
become the rows of one engine call (``fltutor.engine``), and each run's server step acts on
its own slice. Each run's result equals running it alone.

Every random choice is derived from (seed, round, client), so a run resumed from its
checkpoint equals an uninterrupted one. What the server holds (``server.pt``: global models and
server optimizer state), what each client holds (``clients/<k>.pt``: its private state) and the
experimenter's log (``log.pt``, ``results.json``: histories and evaluations) are separate files,
verified by checksum on load (``fltutor.checkpoint``); one process at a time writes a run folder.

``run`` and ``sweep`` are cached table cells: a finished cell is reloaded from
``out_root/cells/<name>-<key>/results.json``, where the key covers the method, every setting,
the model, the data and the library's version and source, so a library change never reloads
stale numbers.
"""
from __future__ import annotations

import copy
import dataclasses
import hashlib
import inspect
import json
import math
import os
import warnings
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
from torch import nn, Tensor
from tqdm.auto import tqdm

from . import __version__, methods
from .checkpoint import (REUSED, CheckpointError, RunLock, atomic_torch_save, atomic_write_json, clean_stray,
                         has_checkpoint, read_checkpoint, remove_checkpoint, write_checkpoint)
from .checks import flag, integer
from .data import FederatedData
from .engine import Params, client_accuracy, client_generator, make_batches, resolve_device
from .models import make_model
from .methods.base import Job, Method, Round, RunConfig

__all__ = ["Federation", "run", "sweep", "grid", "sample_cohort", "split_settings", "cell_key", "atomic_write_json",
           "atomic_torch_save", "finished_results", "last_rounds_mean", "best", "code_version", "CheckpointError"]

# settings that may differ between the runs of one sweep besides floats (which always may)
SWEEPABLE_INTS = ("seed", "local_epochs", "target", "personal_layers")


# ---- settings ---------------------------------------------------------------------------------
def split_settings(method: str, settings: dict) -> tuple[type[Method], RunConfig, Any]:
    """(method class, RunConfig, method parameters) from one flat dict of settings."""
    cls, preset = methods.get(method)
    run_fields = {f.name for f in dataclasses.fields(RunConfig)}
    m_fields = {f.name for f in dataclasses.fields(cls.Params)} if cls.Params else set()
    unknown = sorted(set(settings) - run_fields - m_fields)
    if unknown:
        raise ValueError(f"{method}: unknown setting(s) {unknown}; run settings are {sorted(run_fields)}, "
                         f"{method}'s parameters are {sorted(m_fields) or 'none'}")
    cfg = RunConfig(**{k: v for k, v in settings.items() if k in run_fields})
    mp = cls.Params(**{**preset, **{k: v for k, v in settings.items() if k in m_fields}}) if cls.Params else None
    return cls, cfg, mp


def _flat(cfg: RunConfig, mp) -> dict:
    return {**dataclasses.asdict(cfg), **(dataclasses.asdict(mp) if mp is not None else {})}


def grid(**axes) -> list[dict]:
    """Every combination of the given settings, e.g. ``grid(seed=[0, 1], lr=[0.01, 0.1])`` (4 runs)."""
    out = [{}]
    for name, values in axes.items():
        out = [{**o, name: v} for o in out for v in values]
    return out


_CODE_VERSION = None
# Modules that never change a run's numbers: the papers' printed values, plots, results/ tables and the CLI.
# Editing them keeps finished cells and checkpoints usable (a long CPU run survives a docs fix); every other
# file of the package counts. tests/test_federation.py checks that no training module imports these.
NOT_IN_CODE_VERSION = ("paper_tables.py", "plots.py", "results.py", "__main__.py")


def source_hash(root: Path | str | None = None) -> str:
    """10 hex digits over the package's source files (``root``: the package folder), less NOT_IN_CODE_VERSION."""
    root = Path(root) if root is not None else Path(__file__).parent
    h = hashlib.sha256()
    for p in sorted(root.rglob("*.py")):
        rel = p.relative_to(root).as_posix()
        if rel not in NOT_IN_CODE_VERSION:
            h.update(rel.encode() + p.read_bytes())
    return h.hexdigest()[:10]


def code_version() -> str:
    """The package version plus a hash of the source that trains, so edited code never reuses old cells."""
    global _CODE_VERSION
    if _CODE_VERSION is None:
        _CODE_VERSION = f"{__version__}+{source_hash()}"
    return _CODE_VERSION


def cell_key(method: str, settings: dict, model_name: str, data: FederatedData) -> str:
    """12 hex digits naming everything that changes a run's numbers."""
    blob = json.dumps({"method": method, "settings": settings, "model": model_name, "data": data.fingerprint,
                       "code": code_version()}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


# ---- files ---------------------------------------------------------------------------------------
def finished_results(cell_dir, rounds: int) -> dict | None:
    """The results.json of a cell folder that already finished ``rounds`` rounds, else None."""
    if cell_dir is None:
        return None
    path = Path(cell_dir) / "results.json"
    if not path.exists():
        return None
    try:
        done = json.loads(path.read_text())
    except ValueError as err:
        raise CheckpointError(f"{path} is damaged ({err}); delete it (the cell is then resumed or rerun), "
                              "or pass fresh=True") from None
    return done if done.get("rounds_done") == rounds or done.get("diverged") else None


def check_model_fits(model, datas: Sequence[FederatedData], seed: int) -> None:
    """Refuse, before any training, a model that cannot take the data's samples or predict all its labels."""
    net = make_model(model, seed=seed) if isinstance(model, str) else copy.deepcopy(model)
    name = model if isinstance(model, str) else type(model).__name__
    needs = [q for q in inspect.signature(net.forward).parameters.values() if q.default is inspect.Parameter.empty]
    if len(needs) != 1:   # a model that takes extra inputs (e.g. factor selections) is checked by its method
        return
    dtype = next((p.dtype for p in net.parameters()), torch.float32)
    for d in datas:
        shape = tuple(d.x.shape[1:])
        try:
            with torch.no_grad():
                out = net.eval()(d.x[:2].to(dtype))                                      # (2, K)
        except (RuntimeError, ValueError, TypeError) as err:
            raise ValueError(f"model {name!r} cannot take this data's samples of shape {shape}: "
                             f"{str(err).splitlines()[0]}. Use a model made for {shape} (fltutor.models: 'mlp', "
                             "'cnn_fashion', 'lenet5' for (1, 28, 28), 'lenet5_rgb' for (3, 28, 28), 'cnn_cifar', "
                             "'lenet5_cifar' for (3, 32, 32); 'resnet18_gn', 'resnet18_bn', 'dla', 'dla_gn' for any 3-channel size)") from None
        top = int(max(d.y.max(), d.y_test.max() if d.y_test is not None and len(d.y_test) else 0))
        if out.ndim != 2 or out.shape[1] <= top:
            raise ValueError(f"model {name!r} outputs shape {tuple(out.shape[1:])} per sample, but the labels go up "
                             f"to {top}; it needs at least {top + 1} class scores")


# ---- metrics read off a history ---------------------------------------------------------------------
def last_rounds_mean(history: list[dict], rounds: int, last: int = 10, key: str = "global_acc") -> float | None:
    """Mean of ``key`` over the evaluations of the last ``last`` rounds (GMA's Tables 7-9 metric)."""
    vals = [h[key] for h in history if h.get(key) is not None and h["round"] > rounds - last]
    return float(np.mean(vals)) if vals else None


def best(history: list[dict], key: str = "global_acc") -> float | None:
    """The best value of ``key`` at any evaluated round ("average best test performance")."""
    vals = [h[key] for h in history if h.get(key) is not None]
    return max(vals) if vals else None


def default_row_chunk(model: nn.Module, device: torch.device, limit_bytes: int = 24 * 2**20) -> int:
    """How many rows (clients x runs) to train together: on a CPU, as many as keep every stacked tensor
    under ``limit_bytes`` (glibc hands larger blocks to mmap, and the page faults of a fresh block every
    step cost more than the batching gains); on a GPU, all of them (0 means no limit)."""
    if device.type != "cpu":
        return 0
    largest = max(p.numel() * p.element_size() for p in model.parameters())
    return max(1, limit_bytes // largest)


def sample_cohort(seed: int, client_fraction: float, num_clients: int, round_: int) -> np.ndarray:
    """The clients of round ``round_`` (0-based), sorted: round(C N) of them (at least one), drawn from (seed, round)
    alone, so a resumed run, a sweep's run and a Flower run (``fltutor.flower``) all train the same cohort."""
    m = max(1, int(round(client_fraction * num_clients)))
    return np.sort(np.random.default_rng([seed, round_]).choice(num_clients, size=m, replace=False))


# ---- the round loop ------------------------------------------------------------------------------------
class _ServerOnlySetting:
    """Stands in for a server-only setting (``Method.server_only``) on the method object that runs the clients'
    step of a sweep whose runs set it differently. Reading it there raises, so a method that names a setting
    server-only but uses it outside ``aggregate`` fails loudly instead of training every run with the first's."""

    def __init__(self, method: str, name: str, values: list):
        self._what = (f"{method}: the clients' step read the setting {name!r}, which the runs of this sweep set "
                      f"differently ({', '.join(map(repr, values))}); a setting in {method}'s server_only may be read "
                      f"only by aggregate. Remove {name!r} from server_only, or run a separate sweep for each {name}")

    def _refuse(self, *_args, **_kwargs):
        raise RuntimeError(self._what)

    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __bool__ = __hash__ = __str__ = __format__ = _refuse
    __contains__ = __iter__ = __len__ = __getitem__ = __call__ = _refuse

    def __getattr__(self, name):
        if name.startswith("__"):   # copy, pickle and introspection look up dunders: not a use of the value
            raise AttributeError(name)
        self._refuse()

    def __repr__(self):
        return "<server-only setting, differs between the runs of this sweep>"


class Federation:
    """One federated run, or a sweep of runs trained as one batched job.

    ``model``: a model name (``fltutor.models``) or a module; ``data``: one ``FederatedData``
    or one per run (with the same number of clients); ``method``: a registered name (``methods.names()``);
    ``runs``: per-run overrides of ``settings`` (None: a single run); ``settings``: run
    settings (``RunConfig``) and the method's parameters. ``device``: "auto" (CUDA, MPS, CPU)
    or a device; ``dtype``: the compute dtype (float64 for exact comparisons); ``row_chunk``: how
    many rows train together (None: automatic, see ``default_row_chunk``; results do not depend on it).
    ``out_dir``: where checkpoints go; a verified checkpoint there is resumed (``fresh=True``: deleted
    instead), and one process at a time may run in it.
    """

    def __init__(self, model: nn.Module | str, data: FederatedData | Sequence[FederatedData],
                 method: str = "fedavg", *, runs: Sequence[dict] | None = None, device="auto",
                 dtype: torch.dtype = torch.float32, out_dir=None, checkpoint_every: int = 10,
                 progress: bool = True, row_chunk: int | None = None, fresh: bool = False, **settings):
        runs = [{}] if runs is None else [dict(r) for r in runs]
        if not runs:
            raise ValueError("runs: a sweep needs at least one run; pass runs=None for a single run")
        self.method_name = method
        self.specs = [split_settings(method, {**settings, **r}) for r in runs]
        cls = self.specs[0][0]
        self.configs: list[RunConfig] = [c for _, c, _ in self.specs]
        self.methods: list[Method] = [cls(mp, cfg) for _, cfg, mp in self.specs]
        self.settings = [_flat(cfg, mp) for _, cfg, mp in self.specs]
        self._check_sweep()
        self._clients_views: dict[int, Method] = {}
        self.R = len(runs)
        self.datas = list(data) if isinstance(data, (list, tuple)) else [data] * self.R
        if len(self.datas) != self.R:
            raise ValueError(f"data: {len(self.datas)} datasets for {self.R} runs; pass one, or one per run")
        d0 = self.datas[0]
        if any(d.num_clients != d0.num_clients for d in self.datas):
            raise ValueError(f"data: the runs of a sweep must have the same number of clients, got "
                             f"{sorted({d.num_clients for d in self.datas})}")
        self.N = d0.num_clients
        for m, cfg in zip(self.methods, self.configs):
            if m.full_participation and cfg.client_fraction != 1:
                raise ValueError(f"{method}: every client trains every round; set client_fraction=1, "
                                 f"got {cfg.client_fraction}")
        self.device, self.dtype = resolve_device(device), dtype
        self.model_name = model if isinstance(model, str) else type(model).__name__
        self._model_spec = model
        check_model_fits(model, self.datas, self.configs[0].seed)
        nets = [m.build_model(model, cfg.seed) for m, cfg in zip(self.methods, self.configs)]
        self.model = nets[0].to(self.device, dtype)
        # the data move to the device once; runs whose x differ (e.g. FedCMNIST's colours per seed) are
        # concatenated, and each run's indices are offset into its own block
        xs, offsets, starts = [], {}, []
        for d in self.datas:
            if id(d.x) not in offsets:
                offsets[id(d.x)] = sum(len(t) for t, _ in xs)
                xs.append((d.x, d.y))
            starts.append(offsets[id(d.x)])
        self.x = torch.cat([t for t, _ in xs]).to(self.device, dtype) if len(xs) > 1 else xs[0][0].to(self.device, dtype)
        self.y = torch.cat([t for _, t in xs]).to(self.device) if len(xs) > 1 else xs[0][1].to(self.device)
        tests = {}
        for d in self.datas:
            if d.x_test is not None and id(d.x_test) not in tests:
                tests[id(d.x_test)] = (d.x_test.to(self.device, dtype), d.y_test.to(self.device))
        self.test_sets = [tests.get(id(d.x_test)) for d in self.datas]
        self.train_parts = [[torch.as_tensor(t, dtype=torch.long).to(self.device) + o for t in d.train]
                            for d, o in zip(self.datas, starts)]
        self.test_parts = [[torch.as_tensor(t, dtype=torch.long).to(self.device) + o for t in d.test]
                           for d, o in zip(self.datas, starts)]
        inits = [{k: v.detach().to(self.device, dtype) for k, v in n.named_parameters()} for n in nets]
        self.global_params: Params = {k: torch.stack([p[k] for p in inits]) for k in inits[0]}  # (R, ...)
        self.server: list[dict] = [m.init_server(p, self.N) for m, p in zip(self.methods, inits)]
        privs = [m.init_private(p, self.N) for m, p in zip(self.methods, inits)]
        self.private: Params = {k: torch.stack([p[k] for p in privs]).to(self.device) for k in privs[0]}  # (R, N, ...)
        self.seen = torch.zeros(self.R, self.N, dtype=torch.bool, device=self.device)
        self.round = 0
        self.histories: list[list[dict]] = [[] for _ in range(self.R)]
        self.diverged: list[dict | None] = [None] * self.R   # {round, client, where} of a run that diverged
        self.out_dir = None if out_dir is None else Path(out_dir)
        self.checkpoint_every = integer("checkpoint_every", checkpoint_every, low=1)
        self.progress = progress
        if row_chunk is not None and (isinstance(row_chunk, bool) or not isinstance(row_chunk, int) or row_chunk < 1):
            raise ValueError(f"row_chunk: {row_chunk!r} must be an integer >= 1 (rows trained together), or None "
                             "for automatic")
        self.row_chunk = default_row_chunk(self.model, self.device) if row_chunk is None else row_chunk
        self._hp_names = [k for k, v in self.settings[0].items()
                          if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if flag("fresh", fresh) and self.out_dir is not None:
            with RunLock(self.out_dir):
                remove_checkpoint(self.out_dir)
        if self.out_dir is not None and has_checkpoint(self.out_dir):
            self.load_checkpoint()

    @property
    def config(self) -> RunConfig:
        """The settings of the first run (every run of a sweep shares rounds and batch size)."""
        return self.configs[0]

    @property
    def history(self) -> list[dict]:
        """The first run's history (a single run's)."""
        return self.histories[0]

    def _check_sweep(self) -> None:
        first = self.settings[0]
        server_only = self.methods[0].server_only   # the same method class in every run
        for s in self.settings[1:]:
            for k, v in s.items():
                v0 = first[k]
                if v == v0 or k in server_only:
                    continue
                if v is None or v0 is None:
                    raise ValueError(f"sweep: {k} is None in one run and {v if v0 is None else v0!r} in another; "
                                     "give every run a value")
                if isinstance(v, float) or isinstance(v0, float) or k in SWEEPABLE_INTS:
                    if isinstance(v, bool) or isinstance(v0, bool):
                        raise ValueError(f"sweep: {k} differs between runs ({v0!r} vs {v!r}), but a sweep's runs "
                                         "must share every non-numeric setting; run them separately")
                    continue
                also = f" and the method's server-only settings {server_only}" if server_only else ""
                raise ValueError(f"sweep: {k} differs between runs ({v0!r} vs {v!r}); a sweep's runs may differ "
                                 f"only in floats and {SWEEPABLE_INTS}{also}. Run separate sweeps for each {k}")

    def _clients_side(self, i: int) -> Method:
        """Run i's method as the batched clients' step of a round sees it: the server-only settings in which
        the sweep's runs differ are masked (``_ServerOnlySetting``), since that step is shared by every run."""
        if i not in self._clients_views:
            m = self.methods[i]
            differ = [k for k in m.server_only if len({repr(s[k]) for s in self.settings}) > 1]
            view = m
            if differ:
                view, params = copy.copy(m), copy.copy(m.params)
                for k in differ:
                    object.__setattr__(params, k, _ServerOnlySetting(
                        self.method_name, k, list(dict.fromkeys(s[k] for s in self.settings))))
                view.params = params
            self._clients_views[i] = view
        return self._clients_views[i]

    # ---- one round ------------------------------------------------------------------------
    def sample_clients(self, run: int, round_: int) -> np.ndarray:
        """The cohort of ``run`` in round ``round_`` (0-based): a fraction of clients, sorted."""
        cfg = self.configs[run]
        return sample_cohort(cfg.seed, cfg.client_fraction, self.N, round_)

    def _hp(self, live: Sequence[int], rows_per_run: Sequence[int]) -> dict[str, Tensor]:
        reps = torch.tensor(rows_per_run)
        return {k: torch.repeat_interleave(torch.tensor([float(self.settings[i][k]) for i in live], dtype=self.dtype),
                                           reps).to(self.device) for k in self._hp_names}

    @property
    def live(self) -> list[int]:
        """The runs still training: those that have not diverged."""
        return [i for i in range(self.R) if self.diverged[i] is None]

    def run_round(self) -> list[dict | None]:
        """Advance every live run by one round; returns each run's history entry (None: diverged earlier).

        A run whose local losses, messages or new global model hold a non-finite number stops:
        its entry and results record ``diverged`` (round, client, where) and no accuracy.
        """
        r = self.round
        live = self.live
        cohorts = [self.sample_clients(i, r) for i in live]
        m0 = self._clients_side(live[0])
        # who trains: the cohort, or every client when the method says so (then rows lo + k are client k's)
        every = m0.trains_every_client
        job, offsets = self._job(live, [np.arange(self.N)] * len(live) if every else cohorts)
        runs_t, clients_t, sizes, batches = job.runs, job.clients, job.sizes, job.batches
        message, new_private, loss = self._client_update(m0, job)
        for k, v in new_private.items():   # private state stays with the clients
            self.private[k][runs_t, clients_t] = v.to(self.private[k].dtype)
        self.seen[runs_t, clients_t] = True
        # one cheap check per row on the device: a non-finite loss or message stops that run
        bad = ~torch.isfinite(loss)
        for v in message.values():
            bad |= ~torch.isfinite(v.reshape(len(v), -1)).all(1)
        bad = bad.cpu().numpy()
        entries: list[dict | None] = [None] * self.R
        for j, i in enumerate(live):
            lo, hi = offsets[j], offsets[j + 1]
            e = {"round": r + 1, "clients": cohorts[j].tolist(), "train_loss": float(loss[lo:hi].mean())}
            entries[i] = e
            if every and bad[lo:hi].any():   # a client that trained but was not sampled still broke the run
                self.diverged[i] = {"round": r + 1, "client": int(np.argmax(bad[lo:hi])), "where": "local training"}
                continue
            # the rows that reach the server: the run's rows, or the cohort's among every client's
            rows = torch.as_tensor(lo + cohorts[j], device=self.device) if every else slice(lo, hi)
            bad_j = bad[lo:hi][cohorts[j]] if every else bad[lo:hi]
            if bad_j.any():
                if not self.methods[i].sets_aside_nonfinite or bad_j.all():
                    self.diverged[i] = {"round": r + 1, "client": int(cohorts[j][int(np.argmax(bad_j))]),
                                        "where": "local training"}
                    continue
                e["set_aside"] = cohorts[j][bad_j].tolist()   # the method leaves them out of its step
                e["train_loss"] = float(loss[rows][torch.as_tensor(~bad_j, device=loss.device)].mean())
            rnd = Round(cohorts[j], sizes[rows], batches.n_steps[rows], r, self.N,
                        finite=torch.as_tensor(~bad_j, device=self.device))
            g = {k: v[i] for k, v in self.global_params.items()}
            new = self.methods[i].aggregate(g, self.server[i], {k: v[rows] for k, v in message.items()}, rnd)
            if not all(bool(torch.isfinite(t).all()) for t in new.values()):
                self.diverged[i] = {"round": r + 1, "client": None, "where": "server step"}
                continue
            for k in self.global_params:
                self.global_params[k][i] = new[k]
        self.round = r + 1
        cfg = self.config
        for i in live:
            e = entries[i]
            if self.diverged[i] is not None:
                e["diverged"] = self.diverged[i]
                e["train_loss"] = e["train_loss"] if math.isfinite(e["train_loss"]) else None
            else:
                if self.round % cfg.eval_every == 0 or self.round == cfg.rounds:
                    e.update(self.evaluate(i))
                e.update(self.methods[i].round_log(self.server[i], self._private_of(i), self.seen[i]))
            self.histories[i].append(e)
        return entries

    def _job(self, live: Sequence[int], cohorts: Sequence[np.ndarray]) -> tuple[Job, list[int]]:
        """The local-training job of this round for the given runs and their cohorts, and each run's row offset."""
        r = self.round
        sizes_c = [len(c) for c in cohorts]
        offsets = np.concatenate([[0], np.cumsum(sizes_c)]).tolist()
        runs_np = np.repeat(np.array(live, dtype=np.int64), sizes_c)
        clients_np = np.concatenate(cohorts)
        runs_t = torch.as_tensor(runs_np, device=self.device)
        clients_t = torch.as_tensor(clients_np, device=self.device)
        parts = [self.train_parts[i][k] for i, k in zip(runs_np, clients_np)]
        gens = [client_generator(self.configs[i].seed, r, int(k)) for i, k in zip(runs_np, clients_np)]
        batches = make_batches(parts, [self.configs[i].local_epochs for i in runs_np], self.config.batch_size,
                               gens, device=self.device, dtype=self.dtype)
        m0 = self._clients_side(live[0])
        global_rows = {k: v[runs_t] for k, v in self.global_params.items()}          # (P, ...)
        private_rows = {k: v[runs_t, clients_t] for k, v in self.private.items()}     # (P, ...)
        server_rows = {k: torch.stack([self.server[i][k] for i in runs_np]) for k in self.server[live[0]]
                       if m0.sends and k.startswith(m0.sends)}  # (P, ...) what the server sends besides the model
        sizes = torch.tensor([len(p) for p in parts], dtype=torch.float64, device=self.device)
        job = Job(self.model, self.x, self.y, batches, m0.client_start(global_rows, private_rows), private_rows,
                  server_rows, self._hp(live, sizes_c), clients_t, runs_t, sizes, parts, gens, r)
        return job, offsets

    def intercept(self, clients: Sequence[int] | int, run: int = 0) -> dict[int, Params]:
        """The messages these clients of run ``run`` would send in the coming round, as an eavesdropper reads them.

        Each client trains from the current global model and its own private state exactly as
        ``run_round`` would train it (the same batches and noise: rows do not depend on each
        other), but nothing changes: no private state, no global model, no round count. Returns
        {client: message} with unstacked tensors. What a message holds is the method's
        ``message_holds``; ``Method.intercept`` reads the model parameters off it.
        """
        integer("run", run, low=0, high=self.R - 1, hint=f"this federation has {self.R} run(s)")
        if self.diverged[run] is not None:
            raise ValueError(f"run: run {run} diverged at round {self.diverged[run]['round']}; it sends nothing")
        ks = [clients] if not isinstance(clients, (list, tuple, np.ndarray, Tensor)) else list(clients)
        ks = [integer("clients", int(k) if isinstance(k, (np.integer, Tensor)) else k, low=0, high=self.N - 1,
                      hint=f"client indices of this federation's {self.N} clients") for k in ks]
        if not ks:
            raise ValueError("clients: give at least one client index")
        job, _ = self._job([run], [np.array(ks)])
        message, _, _ = self._client_update(self.methods[run], job)
        return {k: {n: v[j].detach().clone() for n, v in message.items()} for j, k in enumerate(ks)}

    def _client_update(self, m0: Method, job: Job):
        """The method's client update, in row chunks where one block of rows would be slow (see row_chunk)."""
        P = len(job.generators)
        chunk = self.row_chunk or P
        if chunk >= P:
            return m0.client_update(job)
        outs = [m0.client_update(job.slice(lo, min(P, lo + chunk))) for lo in range(0, P, chunk)]
        cat = lambda i: {k: torch.cat([o[i][k] for o in outs]) for k in outs[0][i]}  # noqa: E731
        return cat(0), cat(1), torch.cat([o[2] for o in outs])

    def _private_of(self, i: int) -> Params:
        return {k: v[i] for k, v in self.private.items()}

    # ---- evaluation -----------------------------------------------------------------------
    def run_params(self, i: int = 0) -> Params:
        """Run i's global model parameters (unstacked)."""
        return {k: v[i] for k, v in self.global_params.items()}

    def eval_model(self, i: int = 0):
        """The model(s) run i's clients are scored with (``methods.base.EvalModel``)."""
        return self.methods[i].eval_model(self.run_params(i), self.server[i], self._private_of(i), self.seen[i])

    def local_accuracy(self, i: int = 0) -> np.ndarray:
        """Accuracy (%) of every client of run i on its own local test set, (N,)."""
        em = self.eval_model(i)
        acc = client_accuracy(self.model, em.params, self.x, self.y, self.test_parts[i], *em.inputs,
                              per_client=em.per_client)
        return acc.cpu().numpy()

    def global_accuracy(self, i: int = 0) -> float | None:
        """Accuracy (%) on the dataset's test split of run i's global model (None if it has none)."""
        gm = self.methods[i].global_model(self.run_params(i), self.server[i])
        if gm is None or self.test_sets[i] is None:
            return None
        params, inputs = gm
        x_test, y_test = self.test_sets[i]
        acc = client_accuracy(self.model, params, x_test, y_test, [torch.arange(len(y_test), device=self.device)],
                              *[{k: v.unsqueeze(0) for k, v in t.items()} if isinstance(t, dict) else t.unsqueeze(0)
                                for t in inputs], per_client=False)
        return float(acc[0])

    def train_accuracy(self, i: int = 0) -> float | None:
        """Accuracy (%) of run i's global model on all its clients' training samples (None if it has none)."""
        gm = self.methods[i].global_model(self.run_params(i), self.server[i])
        if gm is None:
            return None
        params, inputs = gm
        acc = client_accuracy(self.model, params, self.x, self.y, [torch.cat(self.train_parts[i])],
                              *[{k: v.unsqueeze(0) for k, v in t.items()} if isinstance(t, dict) else t.unsqueeze(0)
                                for t in inputs], per_client=False)
        return float(acc[0])

    def evaluate(self, i: int = 0) -> dict:
        acc = self.local_accuracy(i)
        out = {"local_acc": float(acc.mean()), "local_acc_per_client": [round(float(a), 4) for a in acc],
               "global_acc": self.global_accuracy(i) if self.configs[i].eval_global else None}
        if self.configs[i].eval_train:
            out["train_acc"] = self.train_accuracy(i)
        return out

    def branch(self, method: str | None = None, **overrides) -> "Federation":
        """A new Federation that continues from this one's state with other settings.

        Same model, data, device and round; ``overrides`` change the settings of every run
        (a setting the new method does not have is dropped). The global models and histories
        are copied; the server and private state too when the method stays the same, else the
        new method starts its own. E.g. ``fed.branch("fedopt", aggregation="gma")`` continues a
        FedAvg run with GMA's masked averaging.
        """
        method = method or self.method_name
        same = method == self.method_name
        cls, _ = methods.get(method)
        allowed = {f.name for f in dataclasses.fields(RunConfig)} | (
            {f.name for f in dataclasses.fields(cls.Params)} if cls.Params else set())
        runs = [{k: v for k, v in {**s, **overrides}.items() if k in allowed} for s in self.settings]
        new = Federation(self._model_spec, self.datas, method, runs=runs, device=self.device, dtype=self.dtype,
                         progress=self.progress)
        new.round, new.histories = self.round, [list(h) for h in self.histories]
        new.diverged = list(self.diverged)
        new.global_params = {k: v.clone() for k, v in self.global_params.items()}
        if same:
            new.server = [{k: v.clone() if isinstance(v, Tensor) else v for k, v in s.items()} for s in self.server]
            new.private = {k: v.clone() for k, v in self.private.items()}
        new.seen = self.seen.clone()
        return new

    # ---- running, checkpoints, results -------------------------------------------------------
    def run(self, rounds: int | None = None) -> list[list[dict]]:
        """Run until ``rounds`` (default: the config's) are done; returns every run's history."""
        target = self.config.rounds if rounds is None else integer("rounds", rounds, low=0, high=self.config.rounds,
                                                                   hint="raise the rounds setting to train longer")
        lock = RunLock(self.out_dir).acquire() if self.out_dir is not None else None
        try:
            if lock is not None:
                clean_stray(self.out_dir)   # what a killed write left; safe now that this process holds the folder
            desc = self.method_name + (f" x{self.R}" if self.R > 1 else "")
            bar = tqdm(total=target, initial=self.round, desc=desc, disable=not self.progress, unit="round")
            while self.round < target and self.live:
                entries = self.run_round()
                accs = [e["local_acc"] for e in entries if e is not None and e.get("local_acc") is not None]
                post = {"local_acc": f"{np.mean(accs):.2f}"} if accs else {}
                if len(self.live) < self.R:
                    post["diverged"] = f"{self.R - len(self.live)}/{self.R}"
                bar.set_postfix(post)
                bar.update(1)
                if lock is not None and (self.round % self.checkpoint_every == 0 or self.round == target
                                         or not self.live):
                    self.save_checkpoint()
            bar.close()
        finally:
            if lock is not None:
                lock.release()
        for i, d in enumerate(self.diverged):
            if d is not None:
                what = f"run {i} ({self._describe(i)})" if self.R > 1 else f"{self.method_name} ({self._describe(i)})"
                warnings.warn(f"{what} diverged at round {d['round']} ({d['where']}"
                              f"{'' if d['client'] is None else ', client ' + str(d['client'])}); its final accuracy is "
                              "withheld (best and last-10 cover only the rounds before it). Lower lr (or server_lr) "
                              "and run again.", RuntimeWarning, stacklevel=2)
        return self.histories

    def _describe(self, i: int) -> str:
        s = self.settings[i]
        return ", ".join(f"{k}={s[k]}" for k in ("seed", "lr", "server_lr", "mu") if k in s)

    def _identity(self) -> dict:
        return {"method": self.method_name, "settings": self.settings, "model": self.model_name,
                "data": [d.fingerprint for d in self.datas]}

    @property
    def run_key(self) -> str:
        """16 hex digits naming everything that changes this Federation's numbers (stored in its checkpoint)."""
        blob = json.dumps(self._identity(), sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def save_checkpoint(self) -> None:
        """Write the checkpoint (``fltutor.checkpoint``): server.pt (what the server holds), clients/<k>.pt
        (client k's private state, one file each), log.pt, then results.json (evaluations that read both)."""
        if self.out_dir is None:
            raise ValueError("save_checkpoint: this Federation has no out_dir; pass out_dir=... to create it")
        cpu = lambda t: {k: v.detach().cpu() for k, v in t.items()}  # noqa: E731
        server = {"round": self.round, "global_params": cpu(self.global_params),
                  "server": [{k: v.cpu() if isinstance(v, Tensor) else v for k, v in s.items()} for s in self.server]}
        clients = [{"client": c, "round": self.round, "private": {k: v[:, c].detach().cpu().clone()
                                                                  for k, v in self.private.items()},
                    "seen": self.seen[:, c].cpu().clone()} for c in range(self.N)]   # (R, ...) per client
        log = {"round": self.round, "histories": self.histories, "diverged": self.diverged}
        write_checkpoint(self.out_dir, self.run_key, self.round, server, clients, log)
        for i, res in enumerate(self.results()):
            atomic_write_json(self.out_dir / (f"results-{i}.json" if self.R > 1 else "results.json"), res)

    def load_checkpoint(self) -> None:
        """Resume from out_dir's verified checkpoint, made by the same runs (else ``CheckpointError``)."""
        ck = read_checkpoint(self.out_dir, self.run_key)
        srv, log = ck["server"], ck["log"]
        self.round, self.histories = ck["round"], log["histories"]
        self.diverged = log.get("diverged", [None] * self.R)
        dev = lambda t: {k: v.to(self.device) for k, v in t.items()}  # noqa: E731
        self.global_params = dev(srv["global_params"])
        self.server = [{k: v.to(self.device) if isinstance(v, Tensor) else v for k, v in s.items()}
                       for s in srv["server"]]
        if len(ck["clients"]) != self.N:
            raise CheckpointError(f"the checkpoint in {self.out_dir} has {len(ck['clients'])} client files for "
                                  f"{self.N} clients; delete {self.out_dir} to start over")
        for k, v in self.private.items():   # each client's file fills its own slot
            v.copy_(torch.stack([c["private"][k] for c in ck["clients"]], dim=1))
        self.seen = torch.stack([c["seen"] for c in ck["clients"]], dim=1).to(self.device)   # (R, N)
        REUSED["resumed_runs"] += self.R
        REUSED["rounds_resumed"] += self.R * self.round

    def results(self) -> list[dict]:
        """Each run's results: settings, final accuracies, best and last-10 metrics, history."""
        out = []
        for i, hist in enumerate(self.histories):
            last = next((h for h in reversed(hist) if "local_acc" in h), {})
            d = self.datas[i]
            out.append({
                "method": self.method_name, "settings": self.settings[i], "model": self.model_name,
                "data_fingerprint": d.fingerprint, "code_version": code_version(), "rounds_done": self.round,
                "groups": None if d.groups is None else d.groups.tolist(), "group_names": list(d.group_names),
                "diverged": self.diverged[i],
                "final": ({k: None for k in ("local_acc", "global_acc", "local_acc_per_client")}
                          if self.diverged[i] is not None else
                          {k: last.get(k) for k in ("local_acc", "global_acc", "local_acc_per_client")}),
                "best_global_acc": best(hist), "last10_global_acc": last_rounds_mean(hist, self.config.rounds),
                "best_local_acc": best(hist, "local_acc"),
                "history": hist})
        return out


# ---- cached table cells -----------------------------------------------------------------------------
def _cell_dir(out_root, method, settings, model_name, data, label) -> Path:
    name = f"{label}-" if label else ""
    return Path(out_root) / "cells" / f"{name}{method}-seed{settings['seed']}-{cell_key(method, settings, model_name, data)}"


def sweep(model, data, method: str, runs: Sequence[dict], *, out_root=None, label: str = "", device="auto",
          dtype=torch.float32, progress: bool = True, fresh: bool = False, **settings) -> list[dict]:
    """Run, resume or reload R table cells as one batched sweep; returns each run's results.

    A cell that finished earlier (same settings, model, data and code) is reloaded; the others
    train together. ``data`` is one FederatedData or one per run; ``label`` prefixes folder names;
    ``fresh``: ignore finished cells and checkpoints and train every run from the start.
    """
    runs = [dict(r) for r in runs]
    if not runs:   # as Federation refuses it: an empty sweep would return [] and look like a finished one
        raise ValueError("runs: a sweep needs at least one run (one dict of settings per run); got []")
    datas = list(data) if isinstance(data, (list, tuple)) else [data] * len(runs)
    model_name = model if isinstance(model, str) else type(model).__name__
    flats = []
    for r in runs:
        _, cfg, mp = split_settings(method, {**settings, **r})
        flats.append(_flat(cfg, mp))
    results: list[dict | None] = [None] * len(runs)
    dirs = [None] * len(runs)
    if out_root is not None:
        for i, (f, d) in enumerate(zip(flats, datas)):
            dirs[i] = _cell_dir(out_root, method, f, model_name, d, label)
            results[i] = None if flag("fresh", fresh) else finished_results(dirs[i], f["rounds"])
    todo = [i for i, r in enumerate(results) if r is None]
    REUSED["reloaded_cells"] += len(runs) - len(todo)
    if todo:
        out_dir = None
        if out_root is not None:
            out_dir = dirs[todo[0]] if len(todo) == 1 else Path(out_root) / "sweeps" / hashlib.sha256(
                "|".join(str(dirs[i]) for i in todo).encode()).hexdigest()[:12]
        fed = Federation(model, [datas[i] for i in todo], method, runs=[runs[i] for i in todo], device=device,
                         dtype=dtype, out_dir=out_dir, progress=progress, fresh=fresh, **settings)
        fed.run()
        for i, res in zip(todo, fed.results()):
            results[i] = res
            if out_root is not None and len(todo) > 1:
                atomic_write_json(dirs[i] / "results.json", res)
    return results


def run(model, data, method: str, *, out_root=None, label: str = "", device="auto", dtype=torch.float32,
        progress: bool = True, fresh: bool = False, **settings) -> dict:
    """Run, resume or reload one table cell; returns its results (see ``Federation.results``)."""
    return sweep(model, data, method, [{}], out_root=out_root, label=label, device=device, dtype=dtype,
                 progress=progress, fresh=fresh, **settings)[0]
