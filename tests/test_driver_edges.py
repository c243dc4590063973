"""Edges of the engine and the round driver that a mutation audit found untested (2026-11-29: 15 of 53 hand
mutants of engine.py, federation.py, metrics.py, results.py and checks.py survived the suite; each test here
fails on the mutant named in its heading): generator keys, empty test parts, cohort size, partial NaNs, a sweep
whose first run diverges, resuming a diverged run, set-aside clients. CPU only, a few seconds in all."""
import json
import warnings

import numpy as np
import pytest
import torch
from torch.func import functional_call

from fltutor import data, partition
from fltutor.engine import client_accuracy, client_generator, get_params
from fltutor.federation import Federation, finished_results, sample_cohort
from fltutor.metrics import fairness_summary

F64 = dict(device="cpu", dtype=torch.float64, progress=False)
KW = dict(rounds=4, client_fraction=0.5, local_epochs=1, batch_size=16, seed=0)


@pytest.fixture(scope="module")
def fed():
    tr, te = data.standin("mnist", 240, seed=0), data.standin("mnist", 60, train=False, seed=0)
    return data.make_federated(tr, partition.iid(tr.y.numpy(), 6, seed=0), test_fraction=0.2, seed=0, test_set=te)


# ---- E14: the round is part of a client's generator key ----------------------------------------------
def test_client_generator_key_by_hand_and_a_fresh_shuffle_every_round():
    for s, r, c in [(0, 0, 0), (2, 5, 7), (3, 1, 4)]:
        assert client_generator(s, r, c).initial_seed() == ((s * 1_000_003 + r) * 1_000_003 + c) % 2**63
    perms = {tuple(torch.randperm(50, generator=client_generator(0, r, 3)).tolist()) for r in range(5)}
    assert len(perms) == 5, "a client must not replay the same batch order every round"


# ---- E13: one shared model, the last client with no local test sample ----------------------------------
def test_client_accuracy_of_one_model_scores_an_empty_last_part_as_zero():
    torch.manual_seed(0)
    model = torch.nn.Linear(6, 3).double()
    x, y = torch.randn(30, 6, dtype=torch.float64), torch.randint(0, 3, (30,))
    parts = [torch.arange(0, 10), torch.arange(10, 30), torch.arange(0)]
    got = client_accuracy(model, get_params(model), x, y, parts, per_client=False, chunk_samples=7)
    with torch.no_grad():
        want = [100.0 * (functional_call(model, get_params(model), (x[p],)).argmax(1) == y[p]).double().mean().item()
                for p in parts[:2]] + [0.0]
    assert got.shape == (3,) and got.tolist() == pytest.approx(want, abs=1e-12)


# ---- F01: the cohort holds round(C N) clients, not floor(C N) ---------------------------------------------
def test_cohort_size_is_round_of_fraction_times_clients():
    assert all(len(sample_cohort(0, 0.28, 10, r)) == 3 for r in range(5))    # 2.8 -> 3 (floor would give 2)
    assert all(len(sample_cohort(0, 0.05, 10, r)) == 1 for r in range(5))    # 0.5 -> at least one


# ---- M04: worst_10pct takes floor(N / 10) clients -----------------------------------------------------------
def test_worst_10pct_of_19_clients_is_the_single_lowest():
    acc = [50.0 + k for k in range(18)] + [10.0]
    assert fairness_summary(acc)["worst_10pct"] == 10.0                      # 19 // 10 = 1 client (round: 2 -> 30.0)


# ---- F07 and F22: the last round is always scored; "final" is the last scored round -------------------------
def test_last_round_is_scored_and_final_reads_the_last_scored_round(fed):
    fl = Federation("mlp", fed, "fedavg", **F64, **{**KW, "rounds": 5}, eval_every=2)
    fl.run(3)
    assert ["local_acc" in h for h in fl.history] == [False, True, False]
    final = fl.results()[0]["final"]
    assert final["local_acc"] is not None and final["local_acc"] == fl.history[1]["local_acc"]
    fl.run()
    assert ["local_acc" in h for h in fl.history] == [False, True, False, True, True]   # round 5: the last
    assert fl.results()[0]["final"]["global_acc"] == fl.history[-1]["global_acc"] is not None


# ---- F21: the last-10 window is anchored at the configured number of rounds ------------------------------------
def test_last10_of_an_unfinished_run_counts_only_rounds_after_rounds_minus_10(fed):
    fl = Federation("mlp", fed, "fedavg", **F64, **{**KW, "rounds": 20})
    fl.histories = [[{"round": r, "global_acc": float(r)} for r in range(1, 13)]]
    fl.round = 12
    assert fl.results()[0]["last10_global_acc"] == (11.0 + 12.0) / 2             # rounds 11, 12 (not 3..12: 7.5)


# ---- F10: a server step with one non-finite tensor stops the run ---------------------------------------------
def test_a_server_step_with_one_nonfinite_tensor_stops_the_run(fed):
    fl = Federation("mlp", fed, "fedavg", **F64, **KW)
    before = {k: v.clone() for k, v in fl.global_params.items()}
    original = fl.methods[0].aggregate

    def one_nan(g, server, message, rnd):
        new = dict(original(g, server, message, rnd))
        k = next(iter(new))
        new[k] = new[k].clone()
        new[k].view(-1)[0] = float("nan")
        return new
    fl.methods[0].aggregate = one_nan
    with pytest.warns(RuntimeWarning, match="diverged at round 1"):
        fl.run()
    assert fl.diverged[0] == {"round": 1, "client": None, "where": "server step"}
    assert all(torch.equal(fl.global_params[k], before[k]) for k in before)       # the NaN never reached the model


# ---- F11: one non-finite coordinate of one client's message stops the run there, naming that client -------------
def test_one_nonfinite_coordinate_in_a_message_is_local_training_of_that_client(fed):
    fl = Federation("mlp", fed, "fedavg", **F64, **KW)
    cohort = fl.sample_clients(0, 0)
    victim = int(cohort[-1])
    original = fl.methods[0].client_update

    def poison(job):
        message, private, loss = original(job)
        row = int(np.flatnonzero(job.clients.cpu().numpy() == victim)[0])
        k = next(iter(message))
        message = dict(message)
        message[k] = message[k].clone()
        message[k][row].view(-1)[0] = float("nan")
        return message, private, loss
    fl.methods[0].client_update = poison
    with pytest.warns(RuntimeWarning, match="diverged at round 1"):
        fl.run()
    assert fl.diverged[0] == {"round": 1, "client": victim, "where": "local training"}


# ---- F17: in a sweep whose FIRST run diverges, the others keep their own settings ---------------------------
def test_in_a_sweep_the_first_run_diverging_leaves_the_second_equal_to_its_run_alone(fed):
    sw = Federation("mlp", fed, "fedavg", runs=[{"lr": 1e200}, {"lr": 0.05}], **F64, **KW)
    with pytest.warns(RuntimeWarning, match="run 0 .*diverged"):
        sw.run()
    assert sw.diverged[0] is not None and sw.diverged[1] is None and sw.diverged[0]["round"] < KW["rounds"]
    alone = Federation("mlp", fed, "fedavg", **F64, **KW, lr=0.05)
    alone.run()
    for k, v in alone.global_params.items():
        assert torch.equal(sw.global_params[k][1], v[0])
    assert sw.histories[1] == alone.history


# ---- F13: a resumed sweep keeps its diverged run stopped ----------------------------------------------------------
def test_resume_keeps_a_diverged_run_stopped(fed, tmp_path):
    runs = [{"lr": 0.05}, {"lr": 1e200}]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        full = Federation("mlp", fed, "fedavg", runs=runs, **F64, **KW)
        full.run()
        first = Federation("mlp", fed, "fedavg", runs=runs, out_dir=tmp_path, checkpoint_every=1, **F64, **KW)
        first.run(2)
        assert first.diverged[1] is not None
        resumed = Federation("mlp", fed, "fedavg", runs=runs, out_dir=tmp_path, **F64, **KW)
        assert resumed.diverged == first.diverged
        resumed.run()
    assert resumed.histories == full.histories
    for k in full.global_params:
        assert torch.equal(resumed.global_params[k], full.global_params[k])


# ---- F18: a diverged cell counts as finished ---------------------------------------------------------------------
def test_finished_results_accepts_a_diverged_cell_that_stopped_early(tmp_path):
    res = {"rounds_done": 2, "diverged": {"round": 2, "client": 1, "where": "local training"}}
    (tmp_path / "results.json").write_text(json.dumps(res))
    assert finished_results(tmp_path, 10) == res
    (tmp_path / "results.json").write_text(json.dumps({"rounds_done": 2, "diverged": None}))
    assert finished_results(tmp_path, 10) is None                               # unfinished, not diverged


# ---- F12 and F19: set-aside clients leave the train loss alone; an all-bad cohort still stops -------------------
def test_set_aside_train_loss_is_the_finite_clients_and_an_all_bad_cohort_stops():
    from methods.test_waffle_weighted import _data, _fed, _poisoned   # tests/ is on sys.path
    d = _data()
    kept = _fed(_poisoned(d, 9), "logreg", rounds=2, target=0, nonfinite="set_aside")
    kept.run()
    alone = _fed(d.with_parts(d.train[:9], d.test[:9]), "logreg", rounds=2, target=0)
    alone.run()
    for h, g in zip(kept.history, alone.history):
        assert h["set_aside"] == [9] and h["train_loss"] == pytest.approx(g["train_loss"], rel=1e-12)
    bad = d
    for a in range(d.num_clients):
        bad = _poisoned(bad, a)
    every = _fed(bad, "logreg", rounds=2, target=0, nonfinite="set_aside")
    with pytest.warns(RuntimeWarning, match="diverged at round 1"):
        every.run()
    assert every.diverged[0] == {"round": 1, "client": 0, "where": "local training"}
