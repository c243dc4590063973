"""fltutor's methods as Flower apps (Flower >= 1.41, its Message API).

One client handler and one strategy serve every method: the ClientApp's train handler builds a
one-row ``Job`` and calls the method's ``client_update``, and ``MethodStrategy.aggregate_train``
stacks the replies and calls the method's ``aggregate``, so no method is written twice. Where
Flower ships a strategy that computes what fltutor computes (FedAvg, FedProx, QFedAvg), ``flower_strategy``
returns Flower's own class, taught only to sample fltutor's cohort (``FLOWER_OWN`` says why FedAdam
and FedYogi are not among them).

What crosses the network, per round and client: the server sends the global model (ArrayRecord
"arrays"), the server tensors the method shares (``Method.sends``, ArrayRecord "server") and the
round (ConfigRecord "config"); the client answers with its message (ArrayRecord "arrays") and
MetricRecord "metrics" (num-examples, partition-id, n-steps, train-loss). A client's private
state (WAFFLe's factor selections, SCAFFOLD's c_i, FedPer's head, ...) lives in its
``Context.state`` and is never put in a message.

Same numbers: with the same seed, data, cohort and settings, a run through Flower gives the
global model of ``fltutor.Federation`` to float tolerance (``tests/test_flower.py``). The cohort
of round r is ``fltutor.federation.sample_cohort`` over partition ids; the strategy learns which
Flower node holds which partition with one query message before the first round.

Launch: ``run_in_simulation`` (a notebook-friendly wrapper of Flower's simulation runtime; Flower
now recommends ``flwr run`` from the CLI, which the app of ``flower_app/pyproject.toml`` serves: its
code is ``fltutor/flower_app.py``).
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable

import numpy as np
import torch
from torch import nn, Tensor

try:
    from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
    from flwr.clientapp import ClientApp
    from flwr.serverapp import Grid, ServerApp
    from flwr.serverapp import strategy as flwr_strategy
except ImportError as err:   # requirements.txt installs it; a bare `pip install -e .` does not
    raise ImportError("fltutor.flower needs Flower: pip install 'flwr[simulation]>=1.41,<1.43' "
                      f"(see requirements.txt) ({err})") from None

from .data import FederatedData
from .engine import Params, client_accuracy, client_generator, make_batches, resolve_device
from .federation import _flat, check_model_fits, sample_cohort, split_settings
from .methods.base import Job, Method, Round

__all__ = ["Task", "make_client_app", "MethodStrategy", "Tap", "flower_strategy", "make_server_app", "run_strategies",
           "run_in_simulation", "LocalDeployment",
           "FLOWER_OWN", "PRIVATE_KEY"]

PRIVATE_KEY = "fltutor.private"    # the client's Context.state record that holds its private state
QUERY_PARTITION = "fltutor.partition"


# ---- the experiment both sides agree on -------------------------------------------------------------
@dataclass
class Task:
    """What an experiment is: the model, the federation's data, the method and its settings.

    Both apps build the same ``Task``; a client then keeps only its own partition (``shard``), and
    the server never touches ``data``. ``dtype`` float64 makes the equality with fltutor's engine tight.
    """
    model: str | nn.Module
    data: FederatedData
    method: str = "fedavg"
    settings: dict = field(default_factory=dict)
    device: str = "cpu"
    dtype: torch.dtype = torch.float32

    def __post_init__(self):
        self.cls, self.config, self.method_params = split_settings(self.method, self.settings)
        if self.cls.full_participation and self.config.client_fraction != 1:
            raise ValueError(f"{self.method}: every client trains every round; set client_fraction=1, "
                             f"got {self.config.client_fraction}")
        check_model_fits(self.model, [self.data], self.config.seed)
        # build the method's network once (as Federation does): a model the method has no version of (e.g.
        # waffle_ibp's factorized twins) is refused here, by name, rather than when a strategy or client starts
        self.new_method().build_model(self.model, self.config.seed)

    @property
    def num_clients(self) -> int:
        return self.data.num_clients

    def new_method(self) -> Method:
        return self.cls(self.method_params, self.config)

    def initial(self, method: Method) -> tuple[nn.Module, Params]:
        """The network and its initial parameters, as fltutor's engine makes them."""
        dev = resolve_device(self.device)
        net = method.build_model(self.model, self.config.seed).to(dev, self.dtype)
        return net, {k: v.detach().clone() for k, v in net.named_parameters()}

    def hp(self) -> dict[str, Tensor]:
        """Every numeric setting as a (1,) row, as ``Federation`` hands them to ``client_update``."""
        flat = _flat(self.config, self.method_params)
        return {k: torch.tensor([float(v)], dtype=self.dtype, device=resolve_device(self.device))
                for k, v in flat.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def shard(data: FederatedData, k: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Client k's own samples: (x, y, train positions, test positions) into them. Nothing else."""
    tr, te = np.asarray(data.train[k]), np.asarray(data.test[k])
    idx = torch.as_tensor(np.concatenate([tr, te]), dtype=torch.long)
    return data.x[idx], data.y[idx], torch.arange(len(tr)), torch.arange(len(tr), len(tr) + len(te))


def to_record(params: Params) -> ArrayRecord:
    return ArrayRecord({k: v.detach().cpu().contiguous() for k, v in params.items()})


def from_record(record: ArrayRecord | None, device, dtype=None) -> Params:
    if record is None:
        return {}
    out = record.to_torch_state_dict()
    return {k: v.to(device) if dtype is None or not v.is_floating_point() else v.to(device, dtype)
            for k, v in out.items()}


# ---- the client -------------------------------------------------------------------------------------------
def _as_tasks(tasks) -> dict[str, Task]:
    return {"main": tasks} if isinstance(tasks, Task) else dict(tasks)


def make_client_app(tasks: Task | dict[str, Task] | Callable[[Context], dict[str, Task]]) -> ClientApp:
    """A ClientApp that trains and evaluates fltutor methods on its node's partition.

    ``tasks``: one experiment, several by name (one federation of nodes serves them in turn; each
    message names its task in its config), or a function of the node's Context that builds them
    (``flwr run``). The node's partition is ``context.node_config["partition-id"]``.
    """
    app = ClientApp()
    cache: dict = {}
    known: dict[str, Task] = {} if callable(tasks) and not isinstance(tasks, (Task, dict)) else _as_tasks(tasks)

    def setup(context: Context, msg: Message):
        k = int(context.node_config["partition-id"])
        if not known:
            known.update(_as_tasks(tasks(context)))
        name = str(msg.content["config"]["task"]) if "config" in msg.content.config_records else "main"
        if name not in known:
            raise ValueError(f"task: {name!r} is not a task of this ClientApp (it has {sorted(known)})")
        if (name, k) not in cache:
            t = known[name]
            if not 0 <= k < t.num_clients:
                raise ValueError(f"partition-id: {k} is not a client of this task (it has {t.num_clients}); "
                                 f"run it with num-supernodes = {t.num_clients}")
            method = t.new_method()
            net, init = t.initial(method)
            dev = resolve_device(t.device)
            x, y, tr, te = shard(t.data, k)
            cache[name, k] = dict(task=t, method=method, net=net, init=init, x=x.to(dev, t.dtype), y=y.to(dev),
                                  train=tr.to(dev), test=te.to(dev), dev=dev, key=f"{PRIVATE_KEY}.{name}")
        return k, cache[name, k]

    def private_of(c: dict, k: int, context: Context) -> Params:
        """This client's private state (1, ...): from its Context, or at the method's start."""
        if c["key"] in context.state:
            return {n: v.unsqueeze(0) for n, v in from_record(context.state[c["key"]], c["dev"]).items()}
        full = c["method"].init_private(c["init"], c["task"].num_clients)     # (N, ...) at the prior; keep row k
        return {n: v[k:k + 1].to(c["dev"]) for n, v in full.items()}

    @app.query()
    def query(msg: Message, context: Context) -> Message:
        k, c = setup(context, msg)
        return Message(RecordDict({"metrics": MetricRecord({"partition-id": k, "num-examples": len(c["train"])})}),
                       reply_to=msg)

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        k, c = setup(context, msg)
        t, method = c["task"], c["method"]
        cfg = t.config
        rnd = int(msg.content["config"]["server-round"]) - 1
        g = {n: v.unsqueeze(0) for n, v in from_record(msg.content["arrays"], c["dev"], t.dtype).items()}
        server = {n: v.unsqueeze(0) for n, v in from_record(msg.content.array_records.get("server"), c["dev"]).items()}
        private = private_of(c, k, context)
        gen = client_generator(cfg.seed, rnd, k)
        batches = make_batches([c["train"]], [cfg.local_epochs], cfg.batch_size, [gen], device=c["dev"], dtype=t.dtype)
        sizes = torch.tensor([float(len(c["train"]))], dtype=torch.float64, device=c["dev"])
        job = Job(c["net"], c["x"], c["y"], batches, method.client_start(g, private), private, server, t.hp(),
                  torch.tensor([k], device=c["dev"]), torch.tensor([0], device=c["dev"]), sizes, [c["train"]], [gen], rnd)
        message, new_private, loss = method.client_update(job)
        if new_private or (private and c["key"] not in context.state):
            merged = {**{n: v[0] for n, v in private.items()}, **{n: v[0] for n, v in new_private.items()}}
            context.state[c["key"]] = to_record(merged)
        context.state[c["key"] + ".seen"] = ConfigRecord({"seen": True})
        out = {n: v[0] for n, v in message.items()}
        extras = {}
        if msg.content["config"].get("flower-own"):   # Flower's strategies average every array: scalars go in metrics
            extras = {n: float(v) for n, v in out.items() if n not in g and v.numel() == 1}
            out = {n: v for n, v in out.items() if n not in extras}
        metrics = MetricRecord({"num-examples": len(c["train"]), "partition-id": k, "n-steps": int(batches.n_steps[0]),
                                "train-loss": float(loss[0]), **extras})
        return Message(RecordDict({"arrays": to_record(out), "metrics": metrics}), reply_to=msg)

    @app.evaluate()
    def evaluate(msg: Message, context: Context) -> Message:
        """Local accuracy (%) of the model this client is scored with, on its own test samples."""
        k, c = setup(context, msg)
        t, method = c["task"], c["method"]
        g = from_record(msg.content["arrays"], c["dev"], t.dtype)
        server = from_record(msg.content.array_records.get("server"), c["dev"])
        private = private_of(c, k, context)
        seen = torch.tensor([c["key"] + ".seen" in context.state], device=c["dev"])
        em = method.eval_model(g, server, private, seen)
        acc = client_accuracy(c["net"], em.params, c["x"], c["y"], [c["test"]], *em.inputs, per_client=em.per_client)
        return Message(RecordDict({"metrics": MetricRecord({"num-examples": len(c["test"]), "partition-id": k,
                                                            "local-acc": float(acc[0])})}), reply_to=msg)

    return app


# ---- the server ---------------------------------------------------------------------------------------------
class CohortMixin:
    """Samples fltutor's cohort of each round (``sample_cohort`` over partition ids) instead of Flower's."""
    task: Task
    name: str = "main"            # the task's name in the ClientApp (messages carry it in their config)
    connect_timeout_s: float = 120  # how long to wait for every SuperNode to connect
    _nodes: dict[int, int] | None = None

    def partition_nodes(self, grid: Grid) -> dict[int, int]:
        """{partition id: node id}, asked of every node once (one query message each)."""
        if self._nodes is None:
            n = self.task.num_clients
            deadline = time.monotonic() + self.connect_timeout_s
            while len(ids := list(grid.get_node_ids())) < n and time.monotonic() < deadline:
                time.sleep(0.5)          # SuperNodes may still be connecting
            if len(ids) != n:
                raise ValueError(f"num-supernodes: the federation has {len(ids)} nodes but the task has {n} clients; "
                                 f"start {n} SuperNodes (a local simulation: flwr federation simulation-config "
                                 f"--num-supernodes {n})")
            ask = RecordDict({"config": ConfigRecord({"task": self.name})})
            replies = grid.send_and_receive([Message(ask, message_type="query", dst_node_id=i) for i in ids])
            nodes = {}
            for r in replies:
                if r.has_error():
                    raise RuntimeError(f"node {r.metadata.src_node_id} could not say its partition: {r.error.reason}")
                nodes[int(r.content["metrics"]["partition-id"])] = r.metadata.src_node_id
            self._nodes = nodes
        return self._nodes

    def cohort(self, server_round: int) -> np.ndarray:
        cfg = self.task.config
        return sample_cohort(cfg.seed, cfg.client_fraction, self.task.num_clients, server_round - 1)

    def cohort_messages(self, server_round: int, record: RecordDict, grid: Grid, kind: str) -> list[Message]:
        record["config"]["task"] = self.name
        nodes = self.partition_nodes(grid)
        return [Message(record, message_type=kind, dst_node_id=nodes[int(k)]) for k in self.cohort(server_round)]


def _sorted(replies: Iterable[Message]) -> list[Message]:
    """Replies in partition order (fltutor's cohort order); a failed reply stops the run with its reason."""
    out = list(replies)
    bad = [r for r in out if r.has_error()]
    if bad:
        raise RuntimeError(f"{len(bad)} client(s) failed, e.g. node {bad[0].metadata.src_node_id}: {bad[0].error.reason}")
    return sorted(out, key=lambda r: int(r.content["metrics"]["partition-id"]))


class MethodStrategy(CohortMixin, flwr_strategy.Strategy):
    """Any fltutor method as a Flower strategy: the server side of ``Method`` (``aggregate``,
    ``init_server``, ``sends``) over Flower messages. ``history`` keeps one entry per round."""

    def __init__(self, task: Task, *, name: str = "main", evaluate: bool = True, keep_messages: bool = False):
        self.task, self.name = task, name
        self.messages: list[dict] | None = [] if keep_messages else None   # what crossed, see ``Tap``
        self.method = task.new_method()
        _, init = task.initial(self.method)
        self.global_params: Params = init
        self.server = self.method.init_server(init, task.num_clients)
        self.evaluate = evaluate
        self.history: list[dict] = []
        self.diverged: dict | None = None
        self._t0: float | None = None     # when the first round was sent (history's "time_s" counts from it)

    def start(self, grid, *args, **kwargs):
        return super().start(Tap(grid, self.messages) if self.messages is not None else grid, *args, **kwargs)

    def initial_arrays(self) -> ArrayRecord:
        return to_record(self.global_params)

    def _sends(self) -> ArrayRecord:
        m = self.method
        return to_record({k: v for k, v in self.server.items() if m.sends and k.startswith(m.sends)})

    def _record(self, server_round: int, config) -> RecordDict:
        """What the server sends a client: the global model, the shared server tensors and the round."""
        return RecordDict({"arrays": to_record(self.global_params), "server": self._sends(),
                           "config": ConfigRecord({**dict(config), "server-round": server_round})})

    def summary(self) -> None:
        logging.getLogger("flwr").info("fltutor %s through Flower: %s", self.task.method, self.method.describe())

    def configure_train(self, server_round, arrays, config, grid):
        if self.diverged:
            return []
        if self._t0 is None:
            self._t0 = time.perf_counter()
        return self.cohort_messages(server_round, self._record(server_round, config), grid, "train")

    def aggregate_train(self, server_round, replies):
        if self.diverged:
            return None, None
        replies = _sorted(replies)
        dev = next(iter(self.global_params.values())).device
        msgs = [from_record(r.content["arrays"], dev) for r in replies]
        message = {k: torch.stack([m[k] for m in msgs]) for k in msgs[0]} if msgs and msgs[0] else {}
        met = [r.content["metrics"] for r in replies]
        cohort = np.array([int(m["partition-id"]) for m in met])
        rnd = Round(cohort, torch.tensor([float(m["num-examples"]) for m in met], dtype=torch.float64, device=dev),
                    torch.tensor([int(m["n-steps"]) for m in met], device=dev), server_round - 1, self.task.num_clients)
        loss = float(np.mean([m["train-loss"] for m in met]))
        entry = {"round": server_round, "clients": cohort.tolist(), "train_loss": loss,
                 "time_s": time.perf_counter() - self._t0}
        finite = np.isfinite(loss) and all(bool(torch.isfinite(v).all()) for v in message.values())
        new = self.method.aggregate(self.global_params, self.server, message, rnd) if finite else None
        if new is None or not all(bool(torch.isfinite(v).all()) for v in new.values()):
            self.diverged = {"round": server_round, "where": "local training" if not finite else "server step"}
            entry["diverged"] = self.diverged
            self.history.append(entry)
            return None, MetricRecord({"train-loss": loss if np.isfinite(loss) else -1.0})
        self.global_params = {k: v.to(self.global_params[k].dtype) for k, v in new.items()}
        self.history.append(entry)
        return to_record(self.global_params), MetricRecord({"train-loss": loss})

    def configure_evaluate(self, server_round, arrays, config, grid):
        cfg = self.task.config
        if not self.evaluate or self.diverged or (server_round % cfg.eval_every and server_round != cfg.rounds):
            return []                  # scored when fltutor's engine scores: every eval_every rounds and the last
        record = self._record(server_round, config)
        record["config"]["task"] = self.name
        nodes = self.partition_nodes(grid)
        return [Message(record, message_type="evaluate", dst_node_id=nodes[k]) for k in sorted(nodes)]

    def aggregate_evaluate(self, server_round, replies):
        replies = _sorted(replies)
        if not replies:
            return None
        acc = [float(r.content["metrics"]["local-acc"]) for r in replies]
        if self.history and self.history[-1]["round"] == server_round:
            self.history[-1].update(local_acc=float(np.mean(acc)), local_acc_per_client=[round(a, 4) for a in acc])
        return MetricRecord({"local-acc": float(np.mean(acc))})


class Tap:
    """A Grid that notes what every message it carries holds: direction, type, node, and per record its
    arrays' names and bytes and its config entries (what an eavesdropper on the wire would see)."""

    def __init__(self, grid: Grid, log: list):
        self._grid, self.log = grid, log

    @staticmethod
    def _describe(content: RecordDict) -> dict:
        return {"arrays": {n: {k: int(a.numpy().nbytes) for k, a in r.items()} for n, r in content.array_records.items()},
                "config": {n: dict(r) for n, r in content.config_records.items()},
                "metrics": {n: sorted(r) for n, r in content.metric_records.items()}}

    def send_and_receive(self, messages, *args, **kwargs):
        messages = list(messages)
        self.log += [{"direction": "down", "type": m.metadata.message_type, "node": m.metadata.dst_node_id,
                      **self._describe(m.content)} for m in messages]
        replies = list(self._grid.send_and_receive(messages, *args, **kwargs))
        self.log += [{"direction": "up", "type": r.metadata.message_type, "node": r.metadata.src_node_id,
                      **self._describe(r.content)} for r in replies if not r.has_error()]
        return replies

    def __getattr__(self, name):
        return getattr(self._grid, name)


# ---- Flower's own strategies, taught fltutor's cohort ----------------------------------------------------------
def _with_cohort(base: type) -> type:
    """Flower's strategy class ``base`` sampling fltutor's cohort; everything else is Flower's."""

    class Cohort(CohortMixin, base):
        def __init__(self, task: Task, *, name: str = "main", **kwargs):
            self.task, self.name = task, name
            base.__init__(self, **kwargs)

        def configure_train(self, server_round, arrays, config, grid):
            msgs = list(base.configure_train(self, server_round, arrays, config, FullGrid(grid)))
            if not msgs:
                return []
            msgs[0].content["config"]["flower-own"] = True   # the client sends scalar extras as metrics
            return self.cohort_messages(server_round, msgs[0].content, grid, "train")

        def configure_evaluate(self, server_round, arrays, config, grid):
            return []    # scored by fltutor's MethodStrategy; Flower's own runs are compared on the global model

    Cohort.__name__ = Cohort.__qualname__ = f"{base.__name__}WithCohort"
    return Cohort


class FullGrid:
    """A Grid view that only lets a strategy read the node list (its messages are re-addressed after)."""

    def __init__(self, grid: Grid):
        self._grid = grid

    def get_node_ids(self):
        return self._grid.get_node_ids()

    def __getattr__(self, name):
        return getattr(self._grid, name)


# fltutor method name -> (Flower strategy, keyword arguments from the task's settings). Flower's FedAdam and
# FedYogi are not here: they divide the step by bias corrections (1 - beta^(t+1)) and start v at 0, while Reddi et
# al.'s Algorithm 2, which GMA follows and fltutor implements, has no bias correction and starts v at tau^2, so
# their global models differ from round 1 on; MethodStrategy runs fltutor's fedadam/fedyogi instead.
FLOWER_OWN: dict[str, tuple[str, Callable[[dict], dict]]] = {
    "fedavg": ("FedAvg", lambda s: {}),
    "fedprox": ("FedProx", lambda s: {"proximal_mu": s["mu"]}),
    # q-FedAvg: Flower's QFedAvg reads F_k (the loss at the received model) from the reply's metrics
    "qffl": ("QFedAvg", lambda s: {"client_learning_rate": s["lr"], "q": s["q"], "train_loss_key": "start_loss"}),
}


def flower_strategy(task: Task, **kwargs):
    """Flower's own strategy for this task's method, sampling fltutor's cohort (``FLOWER_OWN`` lists them)."""
    if task.method not in FLOWER_OWN:
        raise ValueError(f"method: Flower has no strategy that computes {task.method!r}; use MethodStrategy(task) "
                         f"(Flower's own cover {sorted(FLOWER_OWN)})")
    name, args = FLOWER_OWN[task.method]
    flat = _flat(task.config, task.method_params)
    fraction = {"fraction_train": 1.0, "fraction_evaluate": 0.0, "min_train_nodes": 1, "min_available_nodes": 1}
    flwr_log = logging.getLogger("flwr")
    level = flwr_log.level
    flwr_log.setLevel(logging.ERROR)       # Flower warns that fraction_evaluate = 0: on purpose, see configure_evaluate
    try:
        return _with_cohort(getattr(flwr_strategy, name))(task, **fraction, **args(flat), **kwargs)
    finally:
        flwr_log.setLevel(level)


# ---- apps and launch ------------------------------------------------------------------------------------
def make_server_app(strategies, *, rounds: int | None = None, result: dict | None = None) -> ServerApp:
    """A ServerApp that runs each strategy in turn, ``rounds`` rounds (default: its task's) from its task's
    initial model. ``result`` (a dict) receives {strategy name: {"params": final global model, "flower":
    Flower's Result, "strategy": the strategy}}."""
    strategies = list(strategies) if isinstance(strategies, (list, tuple)) else [strategies]
    names = [st.name for st in strategies]
    if len(set(names)) != len(names):
        raise ValueError(f"strategies: names must differ, got {names}; pass name=... to each")
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        run_strategies(grid, strategies, rounds=rounds, result=result)

    return app


def run_strategies(grid: Grid, strategies, *, rounds: int | None = None, result: dict | None = None) -> dict:
    """Run each strategy in turn on ``grid`` (a ServerApp's main calls this); returns and fills ``result``."""
    result = {} if result is None else result
    for st in strategies:
        task = st.task
        initial = st.initial_arrays() if hasattr(st, "initial_arrays") else to_record(task.initial(task.new_method())[1])
        if hasattr(st, "partition_nodes"):
            st.partition_nodes(grid)   # every node's first call (workers start) is not charged to the rounds
        t0 = time.perf_counter()
        res = st.start(grid=grid, initial_arrays=initial, num_rounds=rounds or task.config.rounds)
        params = getattr(st, "global_params", None) or from_record(res.arrays, resolve_device(task.device), task.dtype)
        result[st.name] = {"params": params, "flower": res, "strategy": st, "wall_s": time.perf_counter() - t0}
    return result


def run_in_simulation(tasks: Task | dict[str, Task], strategies=None, *, rounds: int | None = None,
                      cpus_per_client: float = 1, verbose: bool = False) -> dict:
    """Run tasks through Flower's simulation runtime from this process (Ray workers), one after another on
    the same virtual SuperNodes. ``strategies``: one per task (default: ``MethodStrategy`` of each, named
    as the task). Returns {name: {"params", "flower", "strategy", "wall_s"}}; for a single Task, that one entry.

    A notebook-friendly launch. Flower's recommendation for scripts is ``flwr run`` (see the README);
    Flower marks ``run_simulation`` deprecated, and this wrapper silences that warning.
    """
    import warnings
    from flwr.simulation import run_simulation

    named = _as_tasks(tasks)
    if strategies is None:
        strategies = [MethodStrategy(t, name=n) for n, t in named.items()]
    strategies = list(strategies) if isinstance(strategies, (list, tuple)) else [strategies]
    missing = [st.name for st in strategies if st.name not in named]
    if missing:
        raise ValueError(f"strategies: {missing} name no task; the tasks are {sorted(named)}")
    sizes = {t.num_clients for t in named.values()}
    if len(sizes) != 1:
        raise ValueError(f"tasks: every task of one simulation must have the same number of clients, got {sorted(sizes)}")
    out: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.getLogger("flwr").setLevel(logging.INFO if verbose else logging.WARNING)
        run_simulation(server_app=make_server_app(strategies, rounds=rounds, result=out),
                       client_app=make_client_app(named), num_supernodes=sizes.pop(),
                       backend_config={"client_resources": {"num_cpus": cpus_per_client, "num_gpus": 0.0},
                                       "init_args": {"logging_level": "ERROR", "log_to_driver": False}},
                       verbose_logging=verbose)
    lost = [st.name for st in strategies if st.name not in out]
    if lost:
        raise RuntimeError(f"the Flower run stopped before {lost} finished; run with verbose=True to see why")
    return out[strategies[0].name] if isinstance(tasks, Task) else out


# ---- a real deployment on one machine: one SuperLink and N SuperNodes as separate processes -------------------
def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> bool:
    import socket
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


class LocalDeployment:
    """A SuperLink and ``num_nodes`` SuperNodes on 127.0.0.1, each its own process (TLS off: local use only).

    The multi-machine layout in miniature: on real machines each SuperNode runs where its data is,
    with ``--superlink <host>:<port>`` and TLS certificates instead of ``--insecure`` (Flower's docs:
    "Enable TLS connections", "Authenticate SuperNodes"). Use as a context manager; on exit every
    process is stopped (SIGTERM, then SIGKILL after ``grace_s``). ``run(app_dir, run_config)`` submits a
    run with ``flwr run --stream`` and returns when it ends, or raises after ``timeout_s``.
    Runtime dependency installation is off: the apps run in this Python environment.
    """

    def __init__(self, num_nodes: int, *, home, grace_s: float = 10, env: dict | None = None):
        import os
        from pathlib import Path
        self.num_nodes, self.home, self.grace_s = num_nodes, Path(home), grace_s
        import sys
        bindir = str(Path(sys.executable).parent)    # Flower's processes start its other executables by name
        self.env = {**os.environ, "FLWR_HOME": str(self.home), **(env or {})}
        self.env["PATH"] = os.pathsep.join([bindir, self.env.get("PATH", "")])
        self.port = _free_port()
        self.procs: list = []
        self.logs: list = []

    def _start(self, name: str, args: list[str]):
        import subprocess
        import sys
        from pathlib import Path
        exe = Path(sys.executable).with_name(args[0])
        log = open(self.home / f"{name}.log", "w")
        self.logs.append(log)
        self.procs.append(subprocess.Popen([str(exe) if exe.exists() else args[0], *args[1:]], env=self.env,
                                           stdout=log, stderr=subprocess.STDOUT, start_new_session=True))

    def __enter__(self) -> "LocalDeployment":
        import time
        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / "config.toml").write_text(
            f'[superlink]\ndefault = "local-deployment"\n\n[superlink.local-deployment]\n'
            f'address = "127.0.0.1:{self.port}"\ninsecure = true\n')
        self._start("superlink", ["flower-superlink", "--insecure", "--port", str(self.port),
                                  "--disable-runtime-dependency-installation"])
        deadline = time.monotonic() + 120          # a loaded machine may take a while to start it
        while not _listening(self.port):
            if time.monotonic() > deadline or self.procs[0].poll() is not None:
                self.__exit__(None, None, None)
                raise RuntimeError(f"the SuperLink did not start listening on 127.0.0.1:{self.port}; "
                                   f"see {self.home / 'superlink.log'}")
            time.sleep(0.5)
        for k in range(self.num_nodes):
            self._start(f"supernode{k}", ["flower-supernode", "--insecure", "--superlink", f"127.0.0.1:{self.port}",
                                          "--port", str(_free_port()), "--node-config", f"partition-id={k}"])
        return self

    def run(self, app_dir, run_config: dict | None = None, *, timeout_s: float = 300) -> str:
        """Submit a run of the Flower app in ``app_dir`` and wait for it; returns its log stream."""
        import subprocess
        import sys
        from pathlib import Path
        cfg = " ".join(f"{k}={v!r}" if isinstance(v, str) else f"{k}={str(v).lower() if isinstance(v, bool) else v}"
                       for k, v in (run_config or {}).items())
        exe = Path(sys.executable).with_name("flwr")
        cmd = [str(exe) if exe.exists() else "flwr", "run", str(app_dir), "local-deployment", "--stream"]
        if cfg:
            cmd += ["--run-config", cfg]
        try:
            done = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired as err:
            raise TimeoutError(f"the Flower run did not end within {timeout_s} s; logs in {self.home}") from err
        if done.returncode != 0 or "ServerApp raised an exception" in done.stdout + done.stderr:
            raise RuntimeError(f"flwr run failed (exit {done.returncode}):\n{(done.stdout + done.stderr)[-3000:]}")
        return done.stdout + done.stderr

    def __exit__(self, *exc) -> None:
        import os
        import signal
        import subprocess
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=self.grace_s)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        for log in self.logs:
            log.close()
