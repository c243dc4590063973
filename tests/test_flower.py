"""fltutor's methods through Flower: the same global model as fltutor's engine, and no private state in a message.

One Flower simulation (Ray workers, six virtual SuperNodes) runs all 12 strategies in turn, three
rounds each, in float64; each test compares one of them with ``Federation`` run on the same
seed, data, cohorts and settings. The simulation costs about a minute on 2 cores, mostly Ray's start.
"""
import numpy as np
import pytest
import torch

flwr = pytest.importorskip("flwr", reason="Flower is not installed: pip install -r requirements.txt")

from fltutor import flower as F  # noqa: E402
from fltutor import partition  # noqa: E402
from fltutor.data import FederatedData  # noqa: E402
from fltutor.federation import Federation  # noqa: E402

FEDADAM = dict(eta=0.01, beta_1=0.9, beta_2=0.99, tau=1e-3)
BASE = dict(rounds=3, client_fraction=0.5, local_epochs=1, batch_size=10, lr=0.05, seed=3)
ALL = dict(BASE, client_fraction=1.0)
# name: (fltutor method, settings, Flower's own strategy?)
CASES = {
    "fedavg_flower": ("fedavg", BASE, True),
    "fedprox_flower": ("fedprox", dict(BASE, mu=0.1), True),
    "fedavg": ("fedavg", BASE, False),
    "gma": ("fedopt", dict(BASE, aggregation="gma", server_lr=1.5), False),
    "gma_fedadam": ("fedadam", dict(BASE, aggregation="gma", server_lr=0.01), False),
    "gma_fedyogi": ("fedyogi", dict(BASE, aggregation="gma", server_lr=0.01), False),
    "qffl": ("qffl", dict(BASE, q=1.0), False),
    "qffl_flower": ("qffl", dict(BASE, q=1.0), True),
    "scaffold": ("scaffold", BASE, False),
    "waffle_ibp": ("waffle_ibp", BASE, False),
    "waffle_weighted": ("waffle_weighted", dict(ALL, target=1), False),
    "fedper": ("fedper", BASE, False),
}


def small_data(n_clients=6, n=240, seed=0):
    g = torch.Generator().manual_seed(seed)
    x, y = torch.randn(n, 1, 28, 28, generator=g), torch.arange(n) % 10
    tr, te = partition.split_train_test(partition.shards(y.numpy(), n_clients, 2, seed=seed), 0.25, seed=seed)
    return FederatedData(x, y, tr, te, x[:40], y[:40])


class RecordingGrid:
    """A Grid that keeps every message it sends and receives (the test's wiretap)."""

    def __init__(self, grid, log):
        self._grid, self.log = grid, log

    def send_and_receive(self, messages, *args, **kwargs):
        messages = list(messages)
        self.log += [m.content for m in messages]
        replies = list(self._grid.send_and_receive(messages, *args, **kwargs))
        self.log += [r.content for r in replies if not r.has_error()]
        return replies

    def __getattr__(self, name):
        return getattr(self._grid, name)


class Wiretapped(F.MethodStrategy):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.log = []

    def start(self, grid, *args, **kwargs):
        return super().start(RecordingGrid(grid, self.log), *args, **kwargs)


@pytest.fixture(scope="module")
def runs():
    data = small_data()
    tasks = {name: F.Task("mlp", data, m, s, dtype=torch.float64) for name, (m, s, _) in CASES.items()}
    strategies = [F.flower_strategy(t, name=n) if CASES[n][2] else
                  (Wiretapped if n == "waffle_ibp" else F.MethodStrategy)(t, name=n) for n, t in tasks.items()]
    # Flower's own FedAdam, one round, for the check that it is not Reddi et al.'s Algorithm 2
    tasks["flower_fedadam"] = F.Task("mlp", data, "fedavg", dict(BASE, rounds=1), dtype=torch.float64)
    strategies.append(F._with_cohort(flwr.serverapp.strategy.FedAdam)(
        tasks["flower_fedadam"], name="flower_fedadam", fraction_train=1.0, fraction_evaluate=0.0, min_train_nodes=1,
        min_available_nodes=1, **FEDADAM))
    out = F.run_in_simulation(tasks, strategies)
    refs = {}
    for name, t in tasks.items():
        if name == "flower_fedadam":
            continue
        fed = Federation("mlp", data, t.method, device="cpu", dtype=torch.float64, progress=False, **t.settings)
        fed.run()
        refs[name] = fed
    return out, refs


@pytest.mark.parametrize("name", list(CASES))
def test_flower_gives_the_engines_global_model(runs, name):
    out, refs = runs
    ours, ref = out[name]["params"], refs[name].run_params(0)
    assert set(ours) == set(ref)
    for k in ref:
        assert torch.allclose(ours[k].double(), ref[k], rtol=0, atol=1e-10), f"{name}: {k} differs"
    # the run moved: three rounds changed the model
    init = F.Task("mlp", small_data(), CASES[name][0], CASES[name][1], dtype=torch.float64)
    start = init.initial(init.new_method())[1]
    assert any(not torch.equal(ref[k], start[k]) for k in ref)


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if not c[2]])
def test_cohorts_and_client_accuracy_match(runs, name):
    out, refs = runs
    hist, ref = out[name]["strategy"].history, refs[name].history
    assert [h["clients"] for h in hist] == [h["clients"] for h in ref]
    assert hist[-1]["local_acc_per_client"] == pytest.approx(ref[-1]["local_acc_per_client"], abs=1e-3)


def test_waffle_ibp_selections_never_cross(runs):
    out, refs = runs
    log = out["waffle_ibp"]["strategy"].log
    fed = refs["waffle_ibp"]
    private = {k: v[0] for k, v in fed.private.items()}                     # (N, F) per name, the engine's copy
    assert private and log
    model_names = set(fed.run_params(0))
    arrays = [(k, a) for content in log for rec in content.array_records.values()
              for k, a in rec.to_torch_state_dict().items()]
    assert arrays
    assert {k for k, _ in arrays} <= model_names, "a message carried something besides the shared model"
    for _, a in arrays:                                                     # no client's selection state, any name
        for v in private.values():
            for row in v:
                assert a.shape != row.shape or not torch.allclose(a.double(), row.double()), \
                    "a private selection tensor crossed the network"
    configs = [dict(r) for content in log for r in content.config_records.values()]
    assert all(set(c) <= {"server-round", "task"} for c in configs)


def test_flowers_fedadam_is_bias_corrected_so_fltutor_runs_its_own(runs):
    """Why FLOWER_OWN leaves out FedAdam: after one round, Flower's model is w + eta sqrt(1 - b2^2) / (1 - b1^2)
    * m / (sqrt(v) + tau) with m = (1 - b1) D, v = (1 - b2) D^2 (v starts at 0), while Reddi et al.'s Alg. 2
    (fltutor's fedadam) takes w + eta m / (sqrt(v') + tau) with v' = b2 tau^2 + (1 - b2) D^2."""
    out, _ = runs
    data = small_data()
    one = dict(BASE, rounds=1)
    fedavg = Federation("mlp", data, "fedavg", device="cpu", dtype=torch.float64, progress=False, **one)
    w0 = {k: v.clone() for k, v in fedavg.run_params(0).items()}
    fedavg.run()
    ours = Federation("mlp", data, "fedadam", device="cpu", dtype=torch.float64, progress=False, server_lr=0.01,
                      beta1=0.9, beta2=0.99, server_eps=1e-3, **one)
    ours.run()
    e, b1, b2, tau = FEDADAM["eta"], FEDADAM["beta_1"], FEDADAM["beta_2"], FEDADAM["tau"]
    worst_hand, worst_ours = 0.0, 0.0
    for k, w in w0.items():
        d = fedavg.run_params(0)[k] - w                                       # the clients' mean update
        m = (1 - b1) * d
        hand = w + e * (1 - b2 ** 2) ** 0.5 / (1 - b1 ** 2) * m / ((1 - b2) ** 0.5 * d.abs() + tau)
        worst_hand = max(worst_hand, float((out["flower_fedadam"]["params"][k].double() - hand).abs().max()))
        reddi = w + e * m / ((b2 * tau ** 2 + (1 - b2) * d ** 2).sqrt() + tau)
        assert torch.allclose(ours.run_params(0)[k], reddi, atol=1e-12)     # fltutor is Alg. 2
        worst_ours = max(worst_ours, float((out["flower_fedadam"]["params"][k].double() - reddi).abs().max()))
    assert worst_hand < 1e-6, "Flower's FedAdam is not the bias-corrected step read off its source"
    assert worst_ours > 1e-3, "Flower's FedAdam now agrees with Alg. 2: it could join FLOWER_OWN"


def test_flower_own_strategies_are_flowers(runs):
    out, _ = runs
    assert isinstance(out["fedavg_flower"]["strategy"], flwr.serverapp.strategy.FedAvg)
    assert not isinstance(out["fedavg_flower"]["strategy"], F.MethodStrategy)
    assert isinstance(out["fedprox_flower"]["strategy"], flwr.serverapp.strategy.FedProx)
    assert isinstance(out["qffl_flower"]["strategy"], flwr.serverapp.strategy.QFedAvg)


# ---- bad input, before anything starts --------------------------------------------------------------------
def test_task_refuses_partial_participation_for_full_participation_methods():
    with pytest.raises(ValueError, match="client_fraction=1"):
        F.Task("mlp", small_data(), "waffle_weighted", dict(BASE, client_fraction=0.5))


def test_task_refuses_a_model_the_method_cannot_build():
    """waffle_ibp trains a factorized twin of the model; lenet5_cifar has none. Task says so when it is built
    (before a Flower run starts), naming the model and the models it could use, and takes one of those."""
    g = torch.Generator().manual_seed(0)
    n = 60
    x, y = torch.randn(n, 3, 32, 32, generator=g), torch.arange(n) % 10
    tr, te = partition.split_train_test(partition.shards(y.numpy(), 5, 2, seed=0), 0.25, seed=0)
    cifar_like = FederatedData(x, y, tr, te, x[:10], y[:10])
    with pytest.raises(ValueError, match=r"'lenet5_cifar'.*\['cnn_cifar', 'cnn_fashion', 'mlp'\]"):
        F.Task("lenet5_cifar", cifar_like, "waffle_ibp", BASE)
    F.Task("lenet5_cifar", cifar_like, "fedavg", BASE)      # the baseline model itself is fine
    F.Task("cnn_cifar", cifar_like, "waffle_ibp", BASE)     # and so is a model with a factorized twin


def test_flower_strategy_names_what_flower_has():
    task = F.Task("mlp", small_data(), "fedadam", BASE)
    with pytest.raises(ValueError, match="MethodStrategy.*fedavg"):
        F.flower_strategy(task)


def test_wrong_number_of_supernodes_is_named():
    class Grid:
        def get_node_ids(self):
            return [11, 12, 13]

    st = F.MethodStrategy(F.Task("mlp", small_data(), "fedavg", BASE))
    st.connect_timeout_s = 0.1
    with pytest.raises(ValueError, match="num-supernodes.*3 nodes.*6 clients"):
        st.partition_nodes(Grid())


def test_strategies_need_distinct_names():
    t = F.Task("mlp", small_data(), "fedavg", BASE)
    with pytest.raises(ValueError, match="names must differ"):
        F.make_server_app([F.MethodStrategy(t), F.MethodStrategy(t)])


def test_shard_holds_only_the_clients_samples():
    data = small_data()
    x, y, tr, te = F.shard(data, 2)
    assert len(x) == len(data.train[2]) + len(data.test[2])
    assert torch.equal(x[tr], data.x[torch.as_tensor(data.train[2])])
    assert torch.equal(y[te], data.y[torch.as_tensor(data.test[2])])
    assert np.intersect1d(tr.numpy(), te.numpy()).size == 0


# ---- the multi-process path: a SuperLink and two SuperNodes on 127.0.0.1, `flwr run` -----------------------------
def test_flwr_run_on_a_local_superlink_and_two_supernodes(tmp_path, monkeypatch):
    """``flwr run flower_app`` against real SuperLink/SuperNode processes gives the engine's model, then all stop."""
    import json
    from pathlib import Path
    from fltutor import flower_app
    repo = Path(__file__).resolve().parents[1]
    cfg = {"num-clients": 2, "shards-per-client": 5, "rounds": 2, "client-fraction": 1.0,
           "evaluate": False, "out-dir": str(tmp_path)}
    with F.LocalDeployment(2, home=tmp_path / "flwr", env={"FLTUTOR_DATA": "bundled"}) as dep:
        dep.run(repo / "flower_app", cfg, timeout_s=240)
        procs = list(dep.procs)
    assert all(p.poll() is not None for p in procs), "a Flower process outlived the deployment"
    got = json.loads((tmp_path / "flower_result.json").read_text())
    monkeypatch.setenv("FLTUTOR_DATA", "bundled")
    task = flower_app.task_from_config(cfg)
    fed = Federation(task.model, task.data, task.method, device="cpu", progress=False, **task.settings)
    fed.run()
    ref = fed.run_params(0)
    assert got["param_checksum"] == pytest.approx(sum(float(v.double().sum()) for v in ref.values()), rel=1e-5)
    assert got["global_acc"] == pytest.approx(fed.history[-1]["global_acc"], abs=1e-6)
    assert [h["clients"] for h in got["history"]] == [h["clients"] for h in fed.history]


def test_run_config_errors_name_the_key():
    from fltutor import flower_app
    from fltutor.checks import SettingError
    with pytest.raises(SettingError, match=r"unknown key\(s\) \['num_clients'\]"):
        flower_app.task_from_config({"num_clients": 4})
    with pytest.raises(SettingError, match="settings: .*JSON"):
        flower_app.task_from_config({"settings": "mu=1"})
