"""The round loop: sweeps equal their runs alone, resume equals uninterrupted, private state stays
with the clients, cached table cells, errors before training, branch(), and CPU/CUDA agreement."""
import json
import time

import pytest
import torch

from fltutor import aggregators, federation, methods, partition
from fltutor.data import FederatedData, make_federated, standin
from fltutor.engine import client_generator, train_client
from fltutor.checkpoint import CheckpointError, read_checkpoint
from fltutor.federation import Federation, grid
from fltutor.models import make_model

from methods.tiny import METHOD_SETTINGS, tiny_fed  # tests/ is on sys.path (pytest rootdir insertion)

F64 = dict(device="cpu", dtype=torch.float64, progress=False)
BASE = dict(rounds=2, client_fraction=0.5, local_epochs=1, batch_size=10, lr=0.05, seed=0)
WAFFLE = dict(num_factors=6, selection_optimizer="adam", selection_lr=0.1)
NO_CUDA = "no CUDA GPU here; run pytest on a GPU machine to check device agreement"


def _fed(seed=0, n=240, num_clients=8, part_seed=0) -> FederatedData:
    """Stand-in MNIST, 8 clients of unequal sizes (Dirichlet labels), with a global test split."""
    train = standin("mnist", n, seed=seed)
    test = standin("mnist", 80, train=False, seed=seed)
    parts = partition.dirichlet_label(train.y.numpy(), num_clients, 0.5, seed=part_seed)
    return make_federated(train, parts, test_fraction=0.25, seed=part_seed, test_set=test)


@pytest.fixture(scope="module")
def fed():
    return _fed()


def _assert_same_run(a: Federation, i: int, b: Federation, j: int = 0, *, exact: bool = False):
    """Run i of ``a`` equals run j of ``b``: weights, server state, private state, seen, history."""
    tol = dict(rtol=0, atol=0) if exact else dict(rtol=1e-10, atol=1e-12)
    for k in a.global_params:
        torch.testing.assert_close(a.global_params[k][i], b.global_params[k][j], **tol)
    assert set(a.private) == set(b.private)
    for k in a.private:
        torch.testing.assert_close(a.private[k][i], b.private[k][j], **tol)
    assert torch.equal(a.seen[i], b.seen[j])
    assert set(a.server[i]) == set(b.server[j])
    for k, v in a.server[i].items():
        if isinstance(v, torch.Tensor):
            torch.testing.assert_close(v, b.server[j][k], **tol, equal_nan=True)
    ha, hb = a.histories[i], b.histories[j]
    assert len(ha) == len(hb) == a.round
    for ea, eb in zip(ha, hb):
        assert ea.keys() == eb.keys()
        assert ea["round"] == eb["round"] and ea["clients"] == eb["clients"]
        if exact:
            assert ea == eb
        else:
            for key in ea:
                if key not in ("round", "clients"):
                    _close(ea[key], eb[key])


def _close(a, b):
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _close(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for u, v in zip(a, b):
            _close(u, v)
    elif isinstance(a, float):
        assert a == pytest.approx(b, rel=1e-9, abs=1e-9, nan_ok=True)
    else:
        assert a == b


# ---- a sweep's runs equal the same runs alone ------------------------------------------------------
SWEEPS = {
    "fedavg_seed_lr_mu": ("fedavg", {}, [dict(seed=0, lr=0.02, mu=0.0), dict(seed=1, lr=0.08, mu=0.5),
                                         dict(seed=0, lr=0.05, mu=0.1)]),
    "fedopt_gma_tau": ("fedopt", dict(aggregation="gma"), grid(tau=[0.2, 0.6], seed=[0, 1])),
    # the aggregation is read only by the server's step, which runs once per run: AVG, GMA and AND share a sweep
    "fedopt_aggregations": ("fedopt", {}, [dict(aggregation="mean", seed=0), dict(aggregation="gma", seed=0),
                                           dict(aggregation="and", seed=1, tau=0.6)]),
    "fedadam": ("fedadam", dict(server_lr=0.1), grid(seed=[0, 1], lr=[0.02, 0.05])),
    "fedyogi": ("fedyogi", dict(server_lr=0.1), [dict(seed=2, lr=0.05), dict(seed=0, lr=0.03)]),
    "scaffold": ("scaffold", {}, grid(seed=[0, 1], lr=[0.02, 0.05])),
    "waffle_ibp_kl_weight": ("waffle_ibp", WAFFLE, grid(kl_weight=[1.0, 0.1], seed=[0, 1])),
    "fedper_local_epochs": ("fedper", {}, [dict(seed=0, local_epochs=1), dict(seed=1, local_epochs=2)]),
    # every client trains, only the cohort is averaged: each run's cohort rows are picked out of N rows per run
    "pfedme_train_all": ("pfedme", dict(pfedme_train_all=True), grid(seed=[0, 1], lr=[0.02, 0.05])),
}


@pytest.mark.parametrize("name", list(SWEEPS))
def test_sweep_runs_equal_runs_alone(fed, name):
    method, extra, runs = SWEEPS[name]
    settings = {**BASE, **extra}
    swept = Federation("mlp", fed, method, runs=runs, **F64, **settings)
    swept.run()
    assert swept.R == len(runs) and swept.round == settings["rounds"]
    for i, r in enumerate(runs):
        alone = Federation("mlp", fed, method, **F64, **{**settings, **r})
        alone.run()
        _assert_same_run(swept, i, alone)
        assert [h["round"] for h in alone.history] == list(range(1, settings["rounds"] + 1))
    # the runs really differ (a sweep that trained one run R times would pass the checks above)
    w = swept.global_params["fc2.weight"].flatten(1)
    assert all(not torch.allclose(w[0], w[i]) for i in range(1, len(runs)))


def test_in_float32_a_sweep_equals_its_runs_alone_only_to_rounding(fed):
    """The batched kernels sum in another order than a single run's, so in float32 the two agree to a few
    units in the last place, not bit for bit (the README says what 100 rounds make of that)."""
    kw = dict(device="cpu", dtype=torch.float32, progress=False, **{**BASE, "rounds": 4}, **WAFFLE)
    runs = grid(kl_weight=[0.0, 0.1], seed=[0, 1])
    swept = Federation("mlp", fed, "waffle_ibp", runs=runs, **kw)
    swept.run()
    for i, r in enumerate(runs):
        alone = Federation("mlp", fed, "waffle_ibp", **{**kw, **r})
        alone.run()
        for k in alone.global_params:
            torch.testing.assert_close(swept.global_params[k][i], alone.global_params[k][0], rtol=0, atol=2e-6)
        for k in alone.private:
            torch.testing.assert_close(swept.private[k][i], alone.private[k][0], rtol=0, atol=2e-6)


def test_sweep_with_one_partition_per_run(fed):
    other = _fed(part_seed=3)
    data = [fed, fed.with_parts(other.train, other.test)]          # the same tensors, another partition
    assert data[1].x is fed.x and data[1].fingerprint != fed.fingerprint
    runs = [dict(seed=0), dict(seed=1)]
    swept = Federation("mlp", data, "scaffold", runs=runs, **F64, **BASE)
    swept.run()
    for i, (d, r) in enumerate(zip(data, runs)):
        alone = Federation("mlp", d, "scaffold", **F64, **{**BASE, **r})
        alone.run()
        _assert_same_run(swept, i, alone)
    assert [len(t) for t in swept.test_parts[1]] == [len(t) for t in other.test]


def test_sweep_with_different_x_per_run(fed):
    """Runs with their own tensors (e.g. FedCMNIST's colours per seed): each run reads its own x."""
    alt = standin("mnist", 240, seed=5)
    data = [fed, FederatedData(alt.x, fed.y, fed.train, fed.test, fed.x_test * 0.5, fed.y_test)]
    runs = [dict(seed=0), dict(seed=0)]                               # same seed: only the data differ
    swept = Federation("mlp", data, "waffle_ibp", runs=runs, **F64, **BASE, **WAFFLE)
    swept.run()
    for i, d in enumerate(data):
        alone = Federation("mlp", d, "waffle_ibp", **F64, **BASE, **WAFFLE)
        alone.run()
        _assert_same_run(swept, i, alone)
    assert not torch.allclose(swept.global_params["fc1.w_a"][0], swept.global_params["fc1.w_a"][1])
    assert swept.history[-1]["global_acc"] != swept.histories[1][-1]["global_acc"] or \
        swept.history[-1]["local_acc"] != swept.histories[1][-1]["local_acc"]


# ---- resume equals uninterrupted ---------------------------------------------------------------------
@pytest.mark.parametrize("method,extra,runs", [
    ("waffle_ibp", WAFFLE, None),
    ("waffle_ibp", WAFFLE, grid(seed=[0, 1], kl_weight=[1.0, 0.1])),
    ("scaffold", dict(server_opt="adam", server_lr=0.1), [dict(seed=0), dict(seed=1, lr=0.02)]),
])
def test_resume_equals_uninterrupted(tmp_path, fed, method, extra, runs):
    settings = {**BASE, **extra, "rounds": 4}
    full = Federation("mlp", fed, method, runs=runs, **F64, **settings)
    full.run()
    first = Federation("mlp", fed, method, runs=runs, out_dir=tmp_path, checkpoint_every=1, **F64, **settings)
    first.run(2)                                   # "interrupted" after two rounds
    assert read_checkpoint(tmp_path, parties=())["round"] == 2
    resumed = Federation("mlp", fed, method, runs=runs, out_dir=tmp_path, **F64, **settings)
    assert resumed.round == 2 and len(resumed.history) == 2
    resumed.run()
    for i in range(full.R):
        _assert_same_run(resumed, i, full, i, exact=True)
    # the checkpointed state is not just the initial one: private state moved
    assert any(not torch.equal(full.private[k], Federation("mlp", fed, method, runs=runs, **F64, **settings).private[k])
               for k in full.private)


def test_resume_refuses_a_different_run(tmp_path, fed):
    Federation("mlp", fed, "fedavg", out_dir=tmp_path, **F64, **BASE).run()
    for other in ({"lr": 0.01}, {"eval_every": 2}, {"rounds": BASE["rounds"] + 1}):
        with pytest.raises(CheckpointError, match="different run"):
            Federation("mlp", fed, "fedavg", out_dir=tmp_path, **F64, **{**BASE, **other})


def test_a_results_json_says_when_its_wall_time_leaves_out_resumed_work(tmp_path, fed, monkeypatch):
    from fltutor import checkpoint, results
    for k in checkpoint.REUSED:   # one dict, shared by federation and results: count from zero in this test
        monkeypatch.setitem(checkpoint.REUSED, k, 0)
    assert "reused" not in results.provenance(command="t", wall_s=1.0)    # nothing taken over yet
    runs = [dict(seed=0), dict(seed=1)]
    Federation("mlp", fed, "fedavg", runs=runs, out_dir=tmp_path / "a", checkpoint_every=1, **F64,
               **{**BASE, "rounds": 4}).run(3)
    Federation("mlp", fed, "fedavg", runs=runs, out_dir=tmp_path / "a", **F64, **{**BASE, "rounds": 4}).run()
    federation.sweep("mlp", fed, "fedavg", [dict(seed=0)], out_root=tmp_path / "b", **F64, **BASE)
    federation.sweep("mlp", fed, "fedavg", [dict(seed=0)], out_root=tmp_path / "b", **F64, **BASE)
    meta = results.provenance(command="t", wall_s=1.0)
    # two runs resumed after 3 of 4 rounds; the second sweep reloads its one finished cell
    assert {k: meta["reused"][k] for k in checkpoint.REUSED} == {"resumed_runs": 2, "rounds_resumed": 6,
                                                                 "reloaded_cells": 1}
    assert results.provenance_comments(meta)[0].endswith(
        "1.0 s of this process (2 runs resumed, 6 rounds done before, 1 finished cells reloaded) -->")


# ---- server.pt holds no client-private tensor ------------------------------------------------------------
def _walk(obj, path=""):
    """Every (path, tensor) and every dict key inside a loaded checkpoint."""
    tensors, keys = [], []
    if isinstance(obj, torch.Tensor):
        tensors.append((path, obj))
    elif isinstance(obj, dict):
        for k, v in obj.items():
            keys.append(k)
            t, kk = _walk(v, f"{path}/{k}")
            tensors += t
            keys += kk
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            t, kk = _walk(v, f"{path}/{i}")
            tensors += t
            keys += kk
    return tensors, keys


def _holds(tensors, value: torch.Tensor) -> list[str]:
    """Paths of stored tensors equal to ``value``, or holding it as a slice along up to two leading dims."""
    hits, value = [], value.cpu()
    for path, t in tensors:
        extra = t.ndim - value.ndim
        if not 0 <= extra <= 2 or t.shape[extra:] != value.shape or t.dtype != value.dtype:
            continue
        rows = t.reshape(-1, *value.shape)                              # (slices, ...)
        same = (rows == value).reshape(len(rows), -1).all(1)
        hits += [f"{path}[slice {int(i)}]" for i in same.nonzero().flatten()]
    return hits


@pytest.mark.parametrize("method,extra", [
    ("waffle_ibp", WAFFLE), ("fedper", {}), ("scaffold", {}),
    ("pfedme", dict(pfedme_steps=2, pfedme_lr=0.01)), ("apfl", {}),
])
def test_server_checkpoint_holds_no_private_tensor(tmp_path, fed, method, extra):
    fedn = Federation("mlp", fed, method, runs=[dict(seed=0), dict(seed=1)], out_dir=tmp_path, **F64,
                      **{**BASE, "client_fraction": 1.0, **extra})
    fedn.run()
    assert fedn.private and bool(fedn.seen.all())
    ck = read_checkpoint(tmp_path)
    server, files = ck["server"], ck["clients"]
    assert [f["client"] for f in files] == list(range(fedn.N))
    clients = {"private": {k: torch.stack([f["private"][k] for f in files], dim=1) for k in fedn.private}}
    tensors, keys = _walk(server)
    # the check can see what is there: the global model is in server.pt
    assert _holds(tensors, fedn.run_params(1)["fc1.bias"].cpu())
    for k, v in fedn.private.items():
        assert k not in keys, f"server.pt has a key named like the private {k}"
        assert torch.equal(clients["private"][k], v.cpu())            # clients.pt holds it
        for r in range(fedn.R):
            for c in range(fedn.N if v.ndim > 2 else 0):   # per-client scalars (APFL's alpha): by run below
                leak = _holds(tensors, v[r, c])
                assert not leak, f"client {c}'s private {k} of run {r} is in server.pt at {leak}"
            assert not _holds(tensors, v[r])
    # each client's file holds its own state and no other client's
    for c, f in enumerate(files):
        mine, _ = _walk(f)
        for k, v in fedn.private.items():
            for other in range(fedn.N if v.ndim > 2 else 0):
                if other != c and not torch.equal(v[0, other], v[0, c]):
                    assert not _holds(mine, v[0, other]), f"client {c}'s file holds client {other}'s {k}"


# ---- cached table cells ---------------------------------------------------------------------------------
def _norm(res):
    return json.loads(json.dumps(res))


def _no_training(monkeypatch):
    def refuse(self):
        raise AssertionError("trained a cell that should have been reloaded")
    monkeypatch.setattr(Federation, "run_round", refuse)


def test_run_reloads_a_finished_cell_and_keys_settings(tmp_path, fed, monkeypatch):
    first = federation.run("mlp", fed, "fedavg", out_root=tmp_path, **F64, **BASE)
    cells = list((tmp_path / "cells").iterdir())
    assert len(cells) == 1 and cells[0].name.startswith("fedavg-seed0-") and (cells[0] / "results.json").exists()
    with monkeypatch.context() as m:
        _no_training(m)
        t0 = time.perf_counter()
        again = federation.run("mlp", fed, "fedavg", out_root=tmp_path, **F64, **BASE)
        assert time.perf_counter() - t0 < 5
        assert _norm(again) == _norm(first)
        with pytest.raises(AssertionError, match="should have been reloaded"):   # eval_every changes "best"
            federation.run("mlp", fed, "fedavg", out_root=tmp_path, **F64, **{**BASE, "eval_every": 2})
        with pytest.raises(AssertionError, match="should have been reloaded"):
            federation.run("mlp", fed, "fedavg", out_root=tmp_path, **F64, **{**BASE, "lr": 0.02})
        with pytest.raises(AssertionError, match="should have been reloaded"):
            federation.run("mlp", fed, "fedprox", out_root=tmp_path, **F64, **BASE)
    other = federation.run("mlp", fed, "fedavg", out_root=tmp_path, **F64, **{**BASE, "lr": 0.02})
    assert other["settings"]["lr"] == 0.02 and other["final"] != first["final"]
    assert len(list((tmp_path / "cells").glob("*/results.json"))) == 2
    assert first["rounds_done"] == BASE["rounds"] and first["final"]["local_acc"] is not None


def test_sweep_trains_only_unfinished_cells(tmp_path, fed, monkeypatch):
    done = federation.run("mlp", fed, "scaffold", out_root=tmp_path, **F64, **BASE)      # seed 0 cell
    trained = []
    real = Federation.run_round

    def spy(self):
        trained.append([c.seed for c in self.configs])
        return real(self)

    monkeypatch.setattr(Federation, "run_round", spy)
    res = federation.sweep("mlp", fed, "scaffold", grid(seed=[0, 1, 2]), out_root=tmp_path, **F64, **BASE)
    assert trained == [[1, 2]] * BASE["rounds"]                    # one batched job of the two unfinished cells
    assert [r["settings"]["seed"] for r in res] == [0, 1, 2]
    assert _norm(res[0]) == _norm(done)
    alone = Federation("mlp", fed, "scaffold", **F64, **{**BASE, "seed": 2})
    alone.run()
    _close(res[2]["history"], alone.history)
    assert len(list((tmp_path / "cells").iterdir())) == 3
    _no_training(monkeypatch)
    again = federation.sweep("mlp", fed, "scaffold", grid(seed=[0, 1, 2]), out_root=tmp_path, **F64, **BASE)
    assert _norm(again) == _norm(res)


# ---- errors before training --------------------------------------------------------------------------------
def test_unknown_setting_names_it_and_lists_the_allowed_ones(tmp_path, fed, monkeypatch):
    _no_training(monkeypatch)
    with pytest.raises(ValueError, match=r"fedavg: unknown setting\(s\) \['lrr'\]") as err:
        Federation("mlp", fed, "fedavg", lrr=0.1, **F64)
    assert "'lr'" in str(err.value) and "'mu'" in str(err.value) and "'client_fraction'" in str(err.value)
    with pytest.raises(ValueError, match="selection_lr"):
        federation.run("mlp", fed, "fedavg", out_root=tmp_path, selection_lr=0.1, **F64, **BASE)
    with pytest.raises(ValueError, match=r"unknown setting\(s\) \['momentun'\]"):
        federation.sweep("mlp", fed, "fedavg", [dict(momentun=0.9)], out_root=tmp_path, **F64, **BASE)
    with pytest.raises(ValueError, match="unknown; choose one of"):
        Federation("mlp", fed, "fedfoo", **F64)
    assert not any(tmp_path.iterdir())                        # nothing was written


@pytest.mark.parametrize("method,extra,runs,match", [
    ("fedavg", {}, [dict(batch_size=10), dict(batch_size=20)], r"batch_size differs between runs .*\('seed', "
                                                               r"'local_epochs', 'target', 'personal_layers'\)\. Run"),
    ("fedopt", {}, [dict(server_opt="sgd"), dict(server_opt="adam")],
     r"server_opt differs between runs .* server-only settings \('aggregation',\)"),
    ("fedadam", {}, [dict(server_opt="adam"), dict(server_opt="yogi")], "server_opt differs"),
    ("waffle_ibp", WAFFLE, [dict(hard_selection=False), dict(hard_selection=True)], "hard_selection differs"),
    ("waffle_ibp", WAFFLE, [dict(selection_lr=None), dict(selection_lr=0.1)], "selection_lr is None in one run"),
    ("waffle_ibp", WAFFLE, [dict(num_factors=6), dict(num_factors=None)], "num_factors is None in one run"),
    ("fedavg", {}, [dict(rounds=2), dict(rounds=3)], "rounds differs"),
])
def test_sweep_of_non_sweepable_settings_is_refused(tmp_path, fed, monkeypatch, method, extra, runs, match):
    _no_training(monkeypatch)
    settings = {**BASE, **extra}
    for k in runs[0]:
        settings.pop(k, None)
    with pytest.raises(ValueError, match=match):
        Federation("mlp", fed, method, runs=runs, **F64, **settings)
    with pytest.raises(ValueError, match=match):
        federation.sweep("mlp", fed, method, runs, out_root=tmp_path, **F64, **settings)
    assert not any(tmp_path.iterdir())


def test_a_server_only_setting_read_by_the_clients_step_fails_loudly(fed, monkeypatch):
    """FedOpt names `aggregation` server-only, so AVG and GMA runs share a sweep's one clients' step. A method
    that read such a setting there would train every run with the first run's value: it must raise instead,
    naming the setting and the values, while a lone run and a sweep whose runs agree on it still read it."""
    from fltutor.methods.fedavg import FedAvg
    from fltutor.methods.fedopt import FedOpt
    read = []

    def client_update(self, job):
        read.append(self.params.aggregation == "gma")   # a client-side use of a server-only setting
        return FedAvg.client_update(self, job)

    monkeypatch.setattr(FedOpt, "client_update", client_update)
    settings = {**BASE, "rounds": 1}
    with pytest.raises(RuntimeError, match=r"fedopt: the clients' step read the setting 'aggregation', which the "
                                           r"runs of this sweep set differently \('mean', 'gma'\)"):
        Federation("mlp", fed, "fedopt", runs=[dict(aggregation="mean"), dict(aggregation="gma")], **F64,
                   **settings).run()
    assert read == []
    Federation("mlp", fed, "fedopt", aggregation="gma", **F64, **settings).run()
    Federation("mlp", fed, "fedopt", runs=[dict(aggregation="gma", seed=0), dict(aggregation="gma", seed=1)],
               **F64, **settings).run()
    assert read == [True, True]


@pytest.mark.parametrize("method", ["weight_erosion", "waffle_weighted"])
def test_full_participation_methods_need_client_fraction_one(fed, method, monkeypatch):
    _no_training(monkeypatch)
    with pytest.raises(ValueError, match="client_fraction=1"):
        Federation("mlp", fed, method, **F64, **{**BASE, "client_fraction": 0.5})
    with pytest.raises(ValueError, match="client_fraction=1"):
        Federation("mlp", fed, method, runs=grid(target=[0, 1]), **F64, **{**BASE, "client_fraction": 0.5})
    Federation("mlp", fed, method, runs=grid(target=[0, 1]), **F64, **{**BASE, "client_fraction": 1.0})


def test_data_of_a_sweep_must_match_its_runs(fed, monkeypatch):
    _no_training(monkeypatch)
    with pytest.raises(ValueError, match="2 datasets for 3 runs"):
        Federation("mlp", [fed, fed], "fedavg", runs=grid(seed=[0, 1, 2]), **F64, **BASE)
    small = _fed(num_clients=6)
    with pytest.raises(ValueError, match="same number of clients"):
        Federation("mlp", [fed, small], "fedavg", runs=grid(seed=[0, 1]), **F64, **BASE)
    with pytest.raises(ValueError, match="rounds: got 3"):
        Federation("mlp", fed, "fedavg", **F64, **BASE).run(BASE["rounds"] + 1)


@pytest.mark.parametrize("setting,value", [
    ("lr", 0.0), ("lr", -0.1), ("client_fraction", 0.0), ("client_fraction", 1.5), ("local_epochs", 0),
    ("batch_size", 0), ("rounds", 0), ("eval_every", 0),
])
def test_bad_run_settings_are_refused_before_training(fed, monkeypatch, setting, value):
    _no_training(monkeypatch)
    with pytest.raises(ValueError, match=setting):
        Federation("mlp", fed, "fedavg", **F64, **{**BASE, setting: value})


# ---- branch --------------------------------------------------------------------------------------------------
def test_branch_to_gma_equals_a_hand_built_round(fed):
    settings = {**BASE, "rounds": 3}
    base = Federation("mlp", fed, "fedavg", **F64, **settings)
    base.run(2)
    before = {k: v.clone() for k, v in base.global_params.items()}
    gma = base.branch("fedopt", aggregation="gma")
    assert gma.round == 2 and gma.method_name == "fedopt" and len(gma.history) == 2
    gma.run_round()
    # by hand: the cohort trains with the reference loop, then w + mask * (weighted mean update)
    g = base.run_params(0)
    model = make_model("mlp", seed=0).double()
    cohort = base.sample_clients(0, 2)
    trained, sizes = [], []
    for k in cohort:
        part = torch.as_tensor(fed.train[k])
        p, _ = train_client(model, g, fed.x[part].double(), fed.y[part], local_epochs=1, batch_size=10, lr=0.05,
                            generator=client_generator(0, 2, int(k)))
        trained.append(p)
        sizes.append(len(part))
    w = torch.tensor(sizes, dtype=torch.float64) / sum(sizes)
    for k, v in g.items():
        u = torch.stack([t[k] for t in trained]) - v                                  # (C, ...)
        delta = torch.tensordot(w, u, dims=1)
        mask = aggregators.gma_mask(u, 0.4)
        torch.testing.assert_close(gma.run_params(0)[k], v + mask * delta, rtol=1e-10, atol=1e-12)
        if k == "fc1.weight":
            assert (mask < 1).any()   # the mask changed the step: plain FedAvg would not pass
            assert not torch.allclose(gma.run_params(0)[k], v + delta)
    assert gma.round == 3 and [h["round"] for h in gma.history] == [1, 2, 3]
    assert gma.history[-1]["clients"] == cohort.tolist()
    for k in before:   # the branch left the original alone
        assert torch.equal(base.global_params[k], before[k])
    assert base.round == 2 and len(base.history) == 2


def test_branch_with_no_changes_continues_the_run(fed):
    settings = {**BASE, "rounds": 3, **WAFFLE}
    full = Federation("mlp", fed, "waffle_ibp", runs=grid(seed=[0, 1]), **F64, **settings)
    full.run()
    part = Federation("mlp", fed, "waffle_ibp", runs=grid(seed=[0, 1]), **F64, **settings)
    part.run(1)
    cont = part.branch()
    cont.run()
    for i in range(2):
        _assert_same_run(cont, i, full, i)


# ---- CPU and CUDA agree ---------------------------------------------------------------------------------------
@pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_CUDA)
@pytest.mark.parametrize("method,extra", [("fedavg", {}), ("scaffold", {}), ("waffle_ibp", WAFFLE)])
def test_gpu_cpu_and_cuda_runs_agree(fed, method, extra):
    settings = {**BASE, **extra, "rounds": 3}
    cpu = Federation("mlp", fed, method, device="cpu", dtype=torch.float64, progress=False, **settings)
    gpu = Federation("mlp", fed, method, device="cuda", dtype=torch.float64, progress=False, **settings)
    assert gpu.device.type == "cuda" and gpu.x.is_cuda
    cpu.run(), gpu.run()
    for k in cpu.global_params:
        torch.testing.assert_close(gpu.global_params[k].cpu(), cpu.global_params[k], rtol=1e-7, atol=1e-9)
    for k in cpu.private:
        torch.testing.assert_close(gpu.private[k].cpu(), cpu.private[k], rtol=1e-7, atol=1e-9)
    for a, b in zip(gpu.history, cpu.history):
        assert a["clients"] == b["clients"]
        assert a["train_loss"] == pytest.approx(b["train_loss"], rel=1e-7)
        assert a["local_acc"] == pytest.approx(b["local_acc"], abs=1e-6)


@pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_CUDA)
@pytest.mark.parametrize("name", methods.names())
def test_gpu_every_method_runs_on_cuda_as_on_the_cpu(name):
    # every method's server step on the device (waffle_weighted once mixed cuda and cpu weights there)
    s = {"rounds": 3, "client_fraction": 0.5, "local_epochs": 1, "batch_size": 8, "lr": 0.05, "seed": 3,
         **METHOD_SETTINGS.get(name, {})}
    cpu = Federation("mlp", tiny_fed(), name, device="cpu", dtype=torch.float64, progress=False, **s)
    gpu = Federation("mlp", tiny_fed(), name, device="cuda", dtype=torch.float64, progress=False, **s)
    cpu.run(), gpu.run()
    for k in cpu.global_params:
        torch.testing.assert_close(gpu.global_params[k].cpu(), cpu.global_params[k], rtol=1e-7, atol=1e-9)
    assert [h["local_acc"] for h in gpu.history] == pytest.approx([h["local_acc"] for h in cpu.history], abs=1e-6)


@pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_CUDA)
def test_gpu_float32_run_agrees_with_cpu(fed):
    settings = {**BASE, "rounds": 3}
    cpu = Federation("mlp", fed, "fedavg", device="cpu", progress=False, **settings)
    gpu = Federation("mlp", fed, "fedavg", device="cuda", progress=False, **settings)
    cpu.run(), gpu.run()
    for k in cpu.global_params:
        torch.testing.assert_close(gpu.global_params[k].cpu(), cpu.global_params[k], rtol=1e-4, atol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_CUDA)
@pytest.mark.parametrize("method,extra", [("scaffold", {}), ("waffle_ibp", WAFFLE)])
def test_gpu_sweep_equals_runs_alone(fed, method, extra):
    settings = {**BASE, **extra}
    runs = grid(seed=[0, 1], lr=[0.02, 0.05])
    cuda = dict(device="cuda", dtype=torch.float64, progress=False)
    swept = Federation("mlp", fed, method, runs=runs, **cuda, **settings)
    swept.run()
    for i, r in enumerate(runs):
        alone = Federation("mlp", fed, method, **cuda, **{**settings, **r})
        alone.run()
        _assert_same_run(swept, i, alone)


def test_the_code_hash_ignores_presentation_modules_and_counts_the_training_ones(tmp_path):
    import shutil
    from pathlib import Path
    pkg = tmp_path / "fltutor"
    shutil.copytree(Path(federation.__file__).parent, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    before = federation.source_hash(pkg)
    assert before == federation.source_hash()                       # the copy hashes as the package does
    for name in federation.NOT_IN_CODE_VERSION:                     # a docs fix keeps finished cells usable
        with open(pkg / name, "a") as f:
            f.write("\n# edited\n")
        assert federation.source_hash(pkg) == before, name
    for name in ("engine.py", "methods/fedavg.py", "models.py"):    # an edit that may change numbers never does
        p = pkg / name
        text = p.read_text()
        p.write_text(text + "\n# edited\n")
        assert federation.source_hash(pkg) != before, name
        p.write_text(text)
    assert federation.source_hash(pkg) == before


def test_no_module_that_trains_imports_one_left_out_of_the_code_hash():
    # the import closure of federation.py and every method file (methods load by name, so all count), read
    # from the source: a left-out module imported there could change numbers without changing the hash
    import ast
    from pathlib import Path
    root = Path(federation.__file__).parent
    todo = [root / "federation.py", *sorted((root / "methods").glob("*.py"))]
    seen = set()
    while todo:
        p = todo.pop()
        if p in seen or not p.exists():
            continue
        seen.add(p)
        pkg = p.parent
        for node in ast.walk(ast.parse(p.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom):
                base = pkg
                for _ in range(max(node.level - 1, 0)):
                    base = base.parent
                if node.level == 0:
                    if not (node.module or "").startswith("fltutor"):
                        continue
                    base, parts = root, (node.module or "").split(".")[1:]
                else:
                    parts = (node.module or "").split(".") if node.module else []
                mod = base.joinpath(*parts)
                names = [mod.with_suffix(".py"), mod / "__init__.py"] + [mod / f"{a.name}.py" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [root.joinpath(*a.name.split(".")[1:]).with_suffix(".py") for a in node.names
                         if a.name.startswith("fltutor.")]
            todo += [n for n in names if n.exists()]
    used = {p.relative_to(root).as_posix() for p in seen}
    assert {"engine.py", "aggregators.py", "models.py", "methods/waffle_ibp.py"} <= used   # the walk does reach
    assert not used & set(federation.NOT_IN_CODE_VERSION)


def test_cohorts_are_uniform_samples_without_replacement_by_monte_carlo():
    """Over 4,000 rounds with N = 8 and C = 3/8: every cohort holds 3 distinct clients, each client takes part at
    rate 3/8 and each pair at rate (3 x 2) / (8 x 7) = 6/56, as a uniform draw of 3 of 8 without replacement
    gives; within 4.5 standard errors (binomial) of the rates. A draw with replacement or a biased one fails."""
    import numpy as np
    from fltutor.federation import sample_cohort
    n, m, rounds = 8, 3, 4000
    hits, pairs = np.zeros(n), np.zeros((n, n))
    for r in range(rounds):
        c = sample_cohort(7, m / n, n, r)
        assert len(set(c.tolist())) == m
        hits[c] += 1
        pairs[np.ix_(c, c)] += 1
    for rate, p in ((hits / rounds, m / n), (pairs[np.triu_indices(n, 1)] / rounds, m * (m - 1) / (n * (n - 1)))):
        se = np.sqrt(p * (1 - p) / rounds)
        assert np.all(np.abs(rate - p) < 4.5 * se), (rate, p, se)
