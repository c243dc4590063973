"""GMA's Tables 4-5 round (scenarios.participation_round) and scripts/gma_appendix.py.

The AVG branch is checked against the warmed-up FedAvg run simply trained one round more (FedOpt with server SGD
at rate 1 and plain averaging is FedAvg, and both see the same cohort and mini-batches); GMA at tau = 0 keeps every
coordinate, so it must equal AVG; the split into participating and non-participating clients is recomputed by
hand from the per-client accuracies and the cohort.
"""
import json

import numpy as np
import pytest
import torch

from fltutor import data as fdata
from fltutor.checks import SettingError
from fltutor.federation import Federation
from fltutor.scenarios import gma_data, participation_round


def _warm(seeds=(0, 1), fraction=0.5, rounds=2):
    tr, te = fdata.standin("fashionmnist", 400, seed=0), fdata.standin("fashionmnist", 200, train=False, seed=0)
    datas = [gma_data("fashionmnist", "label", 10, seed=s, train_set=tr, test_set=te) for s in seeds]
    warm = Federation("lenet5", datas, "fedavg", runs=[{"seed": s} for s in seeds], rounds=rounds + 1,
                      client_fraction=fraction, local_epochs=1, batch_size=10, lr=0.05, momentum=0.9,
                      eval_every=rounds + 1, progress=False, dtype=torch.float64)
    warm.run(rounds=rounds)
    return warm


def test_avg_is_fedavg_one_round_on_and_the_split_follows_the_cohort():
    warm = _warm()
    before = {k: v.clone() for k, v in warm.global_params.items()}
    got = participation_round(warm, tau=0.4)
    assert warm.round == 2 and all(torch.equal(before[k], warm.global_params[k]) for k in before)  # warm untouched
    on = warm.branch()                      # the same FedAvg, one round more
    on.run_round()
    for i, o in enumerate(got):
        cohort = warm.sample_clients(i, 2)
        assert o["cohort"] == cohort.tolist() and len(cohort) == 5
        acc = on.local_accuracy(i)
        inside = np.zeros(10, bool)
        inside[cohort] = True
        assert o["AVG"][0] == pytest.approx(acc[inside].mean(), abs=1e-9)
        assert o["AVG"][1] == pytest.approx(acc[~inside].mean(), abs=1e-9)
    assert any(o["GMA"] != o["AVG"] for o in got)   # at tau = 0.4 the mask changes the round
    # tau = 0 keeps every coordinate: GMA is AVG
    flat = participation_round(warm, tau=0.0)
    for o in flat:
        assert o["GMA"] == pytest.approx(o["AVG"], abs=1e-9)


def test_a_run_that_diverged_in_the_warm_up_gets_none():
    warm = _warm(seeds=(0,), rounds=1)
    warm.diverged[0] = {"round": 1, "client": 0, "where": "test"}
    assert participation_round(warm) == [None]


@pytest.fixture
def appx(load_script):
    return load_script("gma_appendix")


@pytest.mark.parametrize("args, match", [
    (["--fractions", "1.0"], "--fractions.*0, 1"),
    (["--warmups", "0"], "--warmups"),
    (["--warmups", "10", "200"], "--warmups.*1 to 199"),
    (["--convex-rounds", "5"], "--convex-rounds.*at least 10"),
    (["--convex-lrs", "0"], "--convex-lrs.*> 0"),
])
def test_bad_arguments_stop_before_any_training(appx, args, match, monkeypatch, tmp_path):
    monkeypatch.setattr(appx, "gma_data", lambda *a, **k: pytest.fail("data loaded"))
    with pytest.raises(SettingError, match=match):
        appx.main([*args, "--out-root", str(tmp_path), "--no-write"])


def test_the_script_writes_tidy_rows_and_reloads_a_finished_comparison(appx, monkeypatch, tmp_path):
    tr, te = fdata.standin("fashionmnist", 300, seed=0), fdata.standin("fashionmnist", 100, train=False, seed=0)
    real = appx.gma_data
    monkeypatch.setattr(appx, "gma_data", lambda ds, skew, n, *, seed: real(ds, skew, n, seed=seed, train_set=tr,
                                                                            test_set=te))
    args = ["--tables", "participation", "--seeds", "0", "1", "--fractions", "0.2", "--warmups", "1", "2",
            "--out-root", str(tmp_path / "runs"), "--results-dir", str(tmp_path / "res"), "--no-progress"]
    appx.main(args)
    from fltutor import results
    rows, meta = results.read_table(tmp_path / "res", "participation")
    assert meta["data_source"] == "standin" and "not the full datasets" in meta["scale"]
    keys = {(r["warmup_rounds"], r["seed"], r["aggregation"], r["metric"]) for r in rows}
    assert keys == {(w, s, a, m) for w in (1, 2) for s in (0, 1) for a in ("AVG", "GMA")
                    for m in ("participating_acc", "nonparticipating_acc")}
    # a second call reloads both comparisons: it trains nothing, and writes the same numbers
    saved = sorted((tmp_path / "runs").rglob("compare-w*.json"))
    assert len(saved) == 2 and all(len(json.loads(p.read_text())) == 2 for p in saved)
    real_round = appx.participation_round
    monkeypatch.setattr(appx, "participation_round", lambda *a, **k: pytest.fail("compared again"))
    appx.main(args)
    again, _ = results.read_table(tmp_path / "res", "participation")
    assert again == rows
    # a longer warm-up later resumes the same warm run at round 2: it trains one round more, not three
    from fltutor.checkpoint import REUSED
    monkeypatch.setattr(appx, "participation_round", real_round)
    before = REUSED["rounds_resumed"]
    appx.main([*args[:args.index("--warmups") + 3], "3", *args[args.index("--warmups") + 3:]])
    assert REUSED["rounds_resumed"] - before == 2 * 2   # 2 seeds x 2 rounds done before
    longer, _ = results.read_table(tmp_path / "res", "participation")
    assert [r for r in longer if r["warmup_rounds"] < 3] == rows and {r["warmup_rounds"] for r in longer} == {1, 2, 3}


def test_gma_table_prints_tables_4_5_and_the_convex_case_by_hand(tmp_path, capsys, monkeypatch):
    from fltutor import results
    from test_results import run_script
    ids = {"dataset": "fashionmnist", "skew": "label", "clients": 10, "client_fraction": 0.5, "warmup_rounds": 10}
    vals = {("AVG", "participating_acc"): (80.0, 84.0), ("GMA", "participating_acc"): (83.0, 85.0),
            ("AVG", "nonparticipating_acc"): (70.0, 60.0), ("GMA", "nonparticipating_acc"): (71.0, 62.0)}
    rows = [{**ids, "seed": s, "aggregation": a, "metric": m, "value": v[s]} for (a, m), v in vals.items() for s in (0, 1)]
    results.write_table(tmp_path, "participation", rows, results.provenance(command="appx", scale="full data"))
    conv = [{"dataset": "mnist", "skew": "label", "lr": 0.5, "rounds": 500, "seed": s, "aggregation": a, "metric": m,
             "value": v} for s, a, m, v in ((0, "AVG", "last10_global_acc", 90.0), (0, "GMA", "last10_global_acc", 88.0),
                                            (1, "AVG", "last10_global_acc", 91.0), (1, "GMA", "last10_global_acc", None),
                                            (1, "GMA", "diverged_round", 7))]
    results.write_table(tmp_path, "convex", conv, results.provenance(command="appx", scale="full data"))
    run_script(monkeypatch, "gma_table", tmp_path)
    out = capsys.readouterr().out
    # by hand: participating AVG 82 ± 2.83, GMA 84 ± 1.41, leads +3 and +1: +2.00 ± 1.41 (beyond);
    # non-participating AVG 65 ± 7.07, GMA 66.5 ± 6.36, leads +1 and +2: +1.50 ± 0.71 (beyond)
    assert ("| 50% | 10 | 2 | 82.00 ± 2.83 | 84.00 ± 1.41 | +2.00 ± 1.41 | yes | 65.00 ± 7.07 | 66.50 ± 6.36 | "
            "+1.50 ± 0.71 | yes |") in out
    assert "| paper, Table 4 (50%) | ? | 3 | 86.97 | 89.07 | +2.10 |" in out
    # a seed that diverged is said, not averaged away; the lead then is not computed
    assert "| label | 0.5 | 500 | 2 | 90.50 ± 0.71 | 1 of 2 diverged | — | — |" in out and "87.0 / 88.5 (+1.50)" in out


def test_below_tau_is_the_share_of_coordinates_the_clients_disagree_on():
    from fltutor.scenarios import below_tau
    warm = _warm(seeds=(0, 1), fraction=1.0, rounds=1)
    for run in (0, 1):
        msgs = warm.intercept(list(range(10)), run=run)
        # by hand: the per-client update vectors, their signs' mean, and how often its size is below tau
        ups = np.stack([np.concatenate([(msgs[k][p] - warm.global_params[p][run]).numpy().ravel() for p in sorted(msgs[k])])
                        for k in range(10)])
        a = np.abs(np.sign(ups).mean(0))
        for tau in (0.0, 0.4, 1.0):
            assert below_tau(warm, tau=tau, run=run) == pytest.approx(float((a < tau).mean()), abs=1e-6)  # < one coordinate
    assert below_tau(warm, tau=0.0) == 0.0 and warm.round == 1   # nothing is below 0, and nothing trained


def test_the_fig4_table_runs_on_stand_in_data_and_prints(appx, monkeypatch, tmp_path, capsys):
    tr, te = fdata.standin("mnist", 300, seed=0), fdata.standin("mnist", 100, train=False, seed=0)
    real = appx.gma_data
    monkeypatch.setattr(appx, "gma_data", lambda ds, skew, n, *, seed, **kw: real(ds, skew, n, seed=seed, train_set=tr,
                                                                                  test_set=te, **kw))
    args = ["--tables", "fig4", "--alphas", "0.1", "100", "--fig4-seeds", "0", "1", "--fig4-rounds", "0", "1",
            "--out-root", str(tmp_path / "runs"), "--results-dir", str(tmp_path / "res"), "--no-progress"]
    appx.main(args)
    from fltutor import results
    from test_results import run_script
    rows, _ = results.read_table(tmp_path / "res", "fig4")
    assert len(rows) == 2 * 2 * 2 and all(0 <= r["value"] <= 1 for r in rows)
    monkeypatch.setattr(appx, "below_tau", lambda *a, **k: pytest.fail("measured again"))
    appx.main(args)                                    # reloads every measurement
    assert results.read_table(tmp_path / "res", "fig4")[0] == rows
    capsys.readouterr()
    run_script(monkeypatch, "gma_table", tmp_path / "res")
    out = capsys.readouterr().out
    assert "| Dirichlet α | below τ after 0 rounds (%) | below τ after 1 rounds (%) | seeds |" in out
    m = np.mean([100 * r["value"] for r in rows if r["alpha"] == 0.1 and r["after_rounds"] == 1])
    assert f"| 0.1 | " in out and f"{m:.2f} ± " in out
