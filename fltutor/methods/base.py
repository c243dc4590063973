"""What every federated method has: the hooks the round loop calls, with FedAvg's defaults.

A method says only what differs from FedAvg (the style of Flower's strategies and fedjax's
algorithms):

- ``build_model``: the network its clients train (weight-factorization WAFFLe builds the
  factorized twin of the named model);
- ``init_server`` / ``init_private``: its server state for one run, and every client's
  private state (N, ...), which never reaches the server's files;
- ``client_start``: what a client trains from (default: the global model);
- ``client_update``: the local training of a ``Job`` (rows of every run in a sweep), through
  ``fltutor.engine.train`` and its hooks; returns the message for the server, the new private
  state and each row's mean loss;
- ``aggregate``: the server step of one run, through the pure functions of
  ``fltutor.aggregators``;
- ``eval_model`` / ``global_model``: which model each client is scored with, and which model
  is scored on the dataset's test split;
- ``round_log``: anything worth keeping in the history (weights, factor counts, ...);
- the threat model (notebook 05): ``message_holds``, ``client_keeps`` and ``server_holds`` say
  in words what one intercepted message, the client alone and a breached server hold, and
  ``intercept`` reads the model parameters an attacker gets from one client's message.

``client_update`` sees many runs at once. It must read every number that can differ between
runs (rates, mu, ...) from ``job.hp`` ((P,) tensors), never from ``self.params``; the
server-side hooks run once per run and read ``self.params`` and ``self.config``.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch
from torch import nn, Tensor

from .. import aggregators
from ..checks import check_fields, integer
from ..engine import Batches, Params, train
from ..models import make_model

__all__ = ["RunConfig", "Job", "Round", "EvalModel", "Method", "check_target"]


@dataclass
class RunConfig:
    """The settings every method shares (the package's fixed vocabulary)."""
    rounds: int = 100             # T
    client_fraction: float = 0.1  # C, the fraction of clients sampled per round
    local_epochs: int = 5         # E
    batch_size: int = 10          # B
    lr: float = 0.04              # client learning rate
    momentum: float = 0.0
    weight_decay: float = 0.0
    grad_clip_norm: float = 0.0   # largest L2 norm of each mini-batch gradient (clip_grad_norm_); 0: no clipping
    seed: int = 0
    eval_every: int = 1
    eval_train: bool = False      # also score the global model on every client's training data (GMA Fig. 3a)
    eval_global: bool = True      # score the global model on the test split; False: the clients' held-out splits
                                  # alone (a learning-rate selection reads nothing else; on a CPU the test split
                                  # is about half of a 500-client round's time: benchmarks/eval_share.py)

    def __post_init__(self):
        check_fields(self, {
            "rounds": dict(low=1), "local_epochs": dict(low=1), "batch_size": dict(low=1), "eval_every": dict(low=1),
            "seed": dict(low=0, high=2**32 - 1),
            "client_fraction": dict(low=0, high=1, low_open=True, hint="1 trains every client every round"),
            "lr": dict(low=0, low_open=True, hint="WAFFLe uses 0.04 (MNIST) and 0.02 (FMNIST)"),
            "momentum": dict(low=0, high=1, high_open=True), "weight_decay": dict(low=0),
            "grad_clip_norm": dict(low=0, hint="0 leaves gradients unclipped; 5 keeps SCAFFOLD and WAFFLE finite "
                                               "at lr 0.1 on MNIST (notebook 04, 9b)")})


@dataclass
class Job:
    """One round's local training: P rows, each one client of one run, stacked on dim 0."""
    model: nn.Module
    x: Tensor                     # (n, ...) the whole dataset, on the device
    y: Tensor                     # (n,)
    batches: Batches              # every row's mini-batches
    start: Params                 # (P, ...) what each row trains from (client_start)
    private: Params               # (P, ...) each row's private state
    server: Params                # (P, ...) the server tensors the method sends (``sends``)
    hp: dict[str, Tensor]         # (P,) every numeric setting of the row's run
    clients: Tensor               # (P,) client index of each row
    runs: Tensor                  # (P,) run index of each row
    sizes: Tensor                 # (P,) float64 training samples of each row's client
    train_parts: list[Tensor]     # each row's training indices into x
    generators: list[torch.Generator]  # each row's generator, after its batches were drawn
    round: int                    # 0-based

    def slice(self, lo: int, hi: int) -> "Job":
        """Rows lo..hi of this job (rows are independent, so chunks train alone to the same result)."""
        rows = lambda t: {k: v[lo:hi] for k, v in t.items()}  # noqa: E731
        b = self.batches
        steps = int(b.n_steps[lo:hi].max())
        batches = Batches(b.idx[lo:hi, :steps], b.weight[lo:hi, :steps], b.active[lo:hi, :steps], b.n_steps[lo:hi])
        return Job(self.model, self.x, self.y, batches, rows(self.start), rows(self.private), rows(self.server),
                   rows(self.hp), self.clients[lo:hi], self.runs[lo:hi], self.sizes[lo:hi],
                   self.train_parts[lo:hi], self.generators[lo:hi], self.round)

    def train(self, params: Params | None = None, **hooks) -> tuple[Params, Params, Tensor]:
        """``engine.train`` on this job with the run settings' SGD (lr, momentum, weight decay, clipping)."""
        return train(self.model, self.start if params is None else params, self.x, self.y, self.batches,
                     lr=self.hp["lr"], momentum=self.hp["momentum"], weight_decay=self.hp["weight_decay"],
                     clip_norm=self.hp["grad_clip_norm"], **hooks)


@dataclass
class Round:
    """What the server knows about one run's round when it aggregates."""
    clients: np.ndarray           # (C,) the cohort
    sizes: Tensor                 # (C,) float64 their training sample counts
    n_steps: Tensor               # (C,) local steps each took
    round: int                    # 0-based
    num_clients: int              # N
    finite: Tensor | None = None  # (C,) bool: whose message is finite (None: all; see ``sets_aside_nonfinite``)

    def weights(self, weighting: str) -> Tensor:
        """The cohort's weights in a server mean: its sample counts ("samples", as FedAvg) or ones ("uniform",
        the plain mean that SCAFFOLD's and APFL's Alg. 1 write)."""
        return self.sizes if weighting == "samples" else torch.ones_like(self.sizes)


# the ``weighting`` options of a method whose server mean can be either (SCAFFOLD, APFL): ``Round.weights``
WEIGHTINGS = ("samples", "uniform")


@dataclass
class EvalModel:
    """The model(s) clients are scored with: shared (params unstacked) or one per client (N, ...)."""
    params: Params
    per_client: bool = False
    inputs: tuple = ()            # extra per-client model inputs (N, ...), e.g. factor selections


class Method:
    """FedAvg (McMahan et al. 2017): every hook at its default. Subclasses override what differs."""
    name = "fedavg"
    Params: type = None           # the method's parameters dataclass
    sends: tuple[str, ...] = ()   # prefixes of the server-state tensors a client receives besides the model
    full_participation = False    # True: every client must train every round (client_fraction = 1)
    # True: every client trains every round (its private state moves), but only the sampled cohort's messages
    # reach ``aggregate`` (pFedMe's Alg. 1); the cost of a round is then that of N clients, not C * N
    trains_every_client = False
    # True: a client whose training turns non-finite is set aside (its message still goes to ``aggregate``,
    # which must leave it out) instead of stopping the run; the round's history lists it under "set_aside"
    sets_aside_nonfinite = False
    # the threat model in words (notebook 05 draws it): one intercepted message, the client, a breached server
    message_holds = "the client's whole trained model"
    client_keeps = "its data"
    server_holds = "the global model"

    # False for a method whose local steps have their own rule (not ``Job.train``): it cannot clip gradients
    clips_gradients = True
    # non-numeric parameters that only the server's step reads (``aggregate`` runs once per run), so the runs of
    # one batched sweep may differ in them; every other non-numeric setting must be shared (the clients' step is one)
    server_only: tuple[str, ...] = ()

    def __init__(self, params: Any, config: RunConfig):
        self.params, self.config = params, config
        if config.grad_clip_norm and not self.clips_gradients:
            raise ValueError(f"{self.name}: grad_clip_norm={config.grad_clip_norm!r}, but {self.name}'s local steps "
                             "have their own rule and do not clip gradients; allowed: 0 (off)")

    # ---- model and state ----------------------------------------------------------------
    def build_model(self, model: nn.Module | str, seed: int) -> nn.Module:
        """The network of this run: ``models.make_model(name, seed=seed)`` or a copy of the module."""
        return make_model(model, seed=seed) if isinstance(model, str) else copy.deepcopy(model)

    def init_server(self, global_params: Params, num_clients: int) -> dict:
        """Server state of one run beyond the global model (optimizer moments, control variates)."""
        return {}

    def init_private(self, global_params: Params, num_clients: int) -> Params:
        """Every client's private state, {name: (N, ...)}; it stays with the clients."""
        return {}

    # ---- client side (rows of every run) ---------------------------------------------------
    def client_start(self, global_rows: Params, private_rows: Params) -> Params:
        """The parameters each row trains from, (P, ...): by default the global model."""
        return global_rows

    def client_update(self, job: Job) -> tuple[Params, Params, Tensor]:
        """Local training; returns (message (P, ...), new private state (P, ...), loss (P,))."""
        trained, _, loss = job.train()
        return trained, {}, loss

    # ---- server side (one run) -------------------------------------------------------------
    def aggregate(self, global_params: Params, server: dict, message: Params, rnd: Round) -> Params:
        """The new global model from the cohort's messages (C, ...): the sample-weighted mean."""
        return aggregators.fedavg(global_params, message, rnd.sizes)

    # ---- evaluation --------------------------------------------------------------------------
    def eval_model(self, global_params: Params, server: dict, private: Params, seen: Tensor) -> EvalModel:
        """The model each client is scored with on its local test set (default: the global one)."""
        return EvalModel(global_params)

    def global_model(self, global_params: Params, server: dict) -> tuple[Params, tuple] | None:
        """(params, inputs) scored on the dataset's test split, or None if the method has none."""
        return global_params, ()

    def round_log(self, server: dict, private: Params, seen: Tensor) -> dict:
        """Extra history fields after a round (JSON-able)."""
        return {}

    # ---- the threat model ---------------------------------------------------------------------
    def intercept(self, message: Params, global_params: Params) -> Params:
        """The model parameters an attacker reads off one client's message (one row, unstacked).

        Only names of the global model that the message carries; a name missing from the result
        (FedPer's head, everything of Local) was never sent. Messages that hold the model itself
        (FedAvg and most others) give it whole; extra entries (SCAFFOLD's control-variate change,
        q-FFL's loss) are not model parameters and are left out.
        """
        return {k: message[k] for k in global_params if k in message}

    # ---- helpers ------------------------------------------------------------------------------
    @classmethod
    def describe(cls) -> str:
        """The first line of the method's docstring."""
        return (cls.__doc__ or cls.__name__).strip().splitlines()[0]


def check_target(target, num_clients: int | None = None) -> None:
    """A per-target method's agent: an integer index, below the number of clients when that is known."""
    integer("target", target, low=0, hint="the index of the agent the model is for")
    if num_clients is not None and target >= num_clients:
        raise ValueError(f"target: {target} is not an agent of this data (it has {num_clients})")


def split_rows(tree: Params, offsets: Sequence[int], r: int) -> Params:
    """Run r's rows of a stacked tree, given the cohort offsets of every run."""
    return {k: v[offsets[r]: offsets[r + 1]] for k, v in tree.items()}
