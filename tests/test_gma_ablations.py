"""scripts/gma_ablations.py: GMA's Tables 8, 9, 6 and Fig. 3d on the whole data, run here on stand-in tensors.

Checked against things the script does not compute itself: GMA at tau = 0 keeps every coordinate of the mean,
so the tau table's tau = 0 point must give AVG's numbers; the last-10 metric is recomputed from each cached run's
curve; a run shared by two tables (10 clients, one epoch, momentum 0.9, tau 0.4) trains once; gma_table's
printers against hand computations.
"""
import json

import numpy as np
import pytest

from fltutor import data as fdata
from fltutor import results
from fltutor.checks import SettingError


@pytest.fixture
def abl(load_script, monkeypatch):
    mod = load_script("gma_ablations")
    tr, te = fdata.standin("fashionmnist", 300, seed=0), fdata.standin("fashionmnist", 100, train=False, seed=0)
    real = mod.gma_data
    monkeypatch.setattr(mod, "gma_data", lambda ds, skew, n, *, seed: real(ds, skew, n, seed=seed, train_set=tr,
                                                                           test_set=te))
    return mod


@pytest.mark.parametrize("args, match", [
    (["--clients", "2"], "--clients.*>= 5"),
    (["--epochs", "0"], "--epochs.*>= 1"),
    (["--momenta", "1"], r"--momenta.*\[0, 1\)"),
    (["--lr", "0"], "--lr.*> 0"),
    (["--tau", "1.5"], r"--tau.*\[0, 1\]"),
    (["--taus", "0.2", "-0.1"], r"--taus: got \[0.2, -0.1\].*\[0, 1\]"),
    (["--rounds", "5"], "--rounds.*at least 10"),
])
def test_bad_arguments_stop_before_any_data_is_loaded(abl, args, match, monkeypatch, tmp_path):
    monkeypatch.setattr(abl, "gma_data", lambda *a, **k: pytest.fail("data loaded"))
    with pytest.raises(SettingError, match=match):
        abl.main([*args, "--out-root", str(tmp_path), "--no-write"])


def _args(tmp_path, *extra):
    return ["--seeds", "0", "1", "--rounds", "10", "--out-root", str(tmp_path / "runs"), "--results-dir",
            str(tmp_path / "res"), "--no-progress", *extra]


def test_rows_match_the_cached_curves_and_a_shared_run_trains_once(abl, tmp_path):
    from fltutor.checkpoint import REUSED
    before = REUSED["reloaded_cells"]
    abl.main(_args(tmp_path, "--tables", "clients", "momentum", "--clients", "10", "20", "--momenta", "0.9"))
    assert REUSED["reloaded_cells"] - before == 2 * 2   # momentum 0.9's 2 seeds x 2 aggregations: clients = 10's runs
    rows, meta = results.read_table(tmp_path / "res", "ablations_full")
    assert meta["data_source"] == "standin" and "not the full datasets" in meta["scale"]
    keys = {(r["varied"], r["value_varied"], r["clients"], r["momentum"], r["seed"], r["aggregation"]) for r in rows}
    assert keys == {(t, v, n, 0.9, s, a) for t, v, n in (("clients", 10, 10), ("clients", 20, 20), ("momentum", 0.9, 10))
                    for s in (0, 1) for a in ("AVG", "GMA")}
    # at tau 0.4 the mask changes the runs (so the tau = 0 test below compares two code paths)
    acc = {(r["clients"], r["seed"], r["aggregation"]): r["value"] for r in rows if r["metric"] == "best_global_acc"}
    assert any(acc[n, s, "GMA"] != acc[n, s, "AVG"] for n in (10, 20) for s in (0, 1))
    # momentum 0.9 on 10 clients is clients = 10's run: reloaded, so both tables hold the same numbers
    val = {(r["varied"], r["seed"], r["aggregation"], r["metric"]): r["value"] for r in rows if r["clients"] == 10}
    assert all(val["momentum", s, a, m] == val["clients", s, a, m] for s in (0, 1) for a in ("AVG", "GMA")
               for m in ("last10_global_acc", "best_global_acc"))
    # the last-10 mean, recomputed from every cached run's curve (each run evaluated every round)
    last10 = {round(float(np.mean([e["global_acc"] for e in r["history"] if e.get("global_acc") is not None][-10:])), 4)
              for f in (tmp_path / "runs").rglob("results*.json") for r in [json.loads(f.read_text())] if r.get("history")}
    assert all(r["value"] in last10 for r in rows if r["metric"] == "last10_global_acc")
    before = REUSED["reloaded_cells"]
    abl.main(_args(tmp_path, "--tables", "clients", "--clients", "20"))   # finished: reloaded, the same rows
    assert REUSED["reloaded_cells"] - before == 2 * 2
    again, _ = results.read_table(tmp_path / "res", "ablations_full")
    assert sorted(map(str, again)) == sorted(map(str, rows))


def test_gma_table_prints_the_ablations_beside_the_papers_by_hand(tmp_path, capsys, monkeypatch):
    from test_results import run_script
    def row(v, seed, agg, metric, value):
        return {"dataset": "fashionmnist", "skew": "label", "varied": "clients", "value_varied": v, "clients": v,
                "local_epochs": 1, "momentum": 0.9, "lr": 0.01, "server_lr": 1.0, "tau": 0.4, "rounds": 100,
                "seed": seed, "aggregation": agg, "metric": metric, "value": value}
    rows = [row(50, s, a, m, v) for s, a, m, v in ((0, "AVG", "last10_global_acc", 80.0), (1, "AVG", "last10_global_acc", 82.0),
                                                  (0, "GMA", "last10_global_acc", 81.0), (1, "GMA", "last10_global_acc", 85.0),
                                                  (0, "AVG", "best_global_acc", 84.0), (1, "AVG", "best_global_acc", 86.0),
                                                  (0, "GMA", "best_global_acc", 85.0), (1, "GMA", "best_global_acc", 87.0))]
    results.write_table(tmp_path, "ablations_full", rows, results.provenance(command="abl", scale="full data"))
    run_script(monkeypatch, "gma_table", tmp_path)
    out = capsys.readouterr().out
    # by hand: AVG 81 ± 1.41, GMA 83 ± 2.83, leads +1 and +3: +2.00 ± 1.41 (beyond); best 85 ± 1.41 / 86 ± 1.41;
    # the paper's Table 8 at N = 50: 82.42 / 83.11
    assert ("| Table 8 | clients | 50 | 0.01 / 1 | 2 | 81.00 ± 1.41 | 83.00 ± 2.83 | +2.00 ± 1.41 | yes | 85.00 ± 1.41 | "
            "86.00 ± 1.41 | 82.42 / 83.11 (+0.69) |") in out


def test_tau_table_runs_avg_once_and_gma_at_every_tau(abl, tmp_path):
    from fltutor.checkpoint import REUSED
    fast = ("--lr", "0.1")   # at 0.01 the curves of 10 rounds on stand-in data are flat at 10 %, and every run ties
    abl.main(_args(tmp_path, "--tables", "clients", "--clients", "10", *fast))
    before = REUSED["reloaded_cells"]
    abl.main(_args(tmp_path, "--tables", "tau", "--taus", "0", "0.4", "1", *fast))
    assert REUSED["reloaded_cells"] - before == 2 * 2   # AVG and GMA at tau 0.4 are clients = 10's runs
    rows, _ = results.read_table(tmp_path / "res", "ablations_full")
    tau_rows = [r for r in rows if r["varied"] == "tau"]
    assert {(r["value_varied"], r["tau"], r["aggregation"]) for r in tau_rows} == {
        (0.4, 0.4, "AVG"), (0, 0, "GMA"), (0.4, 0.4, "GMA"), (1, 1, "GMA")}
    got = {(r["tau"], r["aggregation"], r["seed"], r["metric"]): r["value"] for r in tau_rows}
    for s in (0, 1):
        for m in ("last10_global_acc", "best_global_acc"):
            assert got[0, "GMA", s, m] == pytest.approx(got[0.4, "AVG", s, m], abs=1e-3)   # tau 0: the mean itself
    for t in (0.4, 1):   # a real mask moves the curve (so tau 0's equality is not a tie of flat curves)
        assert any(got[t, "GMA", s, "last10_global_acc"] != got[0.4, "AVG", s, "last10_global_acc"] for s in (0, 1))


def test_gma_table_prints_fig3d_against_the_one_avg_run_by_hand(tmp_path, capsys, monkeypatch):
    from test_results import run_script
    def row(tau, seed, agg, metric, value):
        return {"dataset": "fashionmnist", "skew": "label", "varied": "tau", "value_varied": tau, "clients": 10,
                "local_epochs": 1, "momentum": 0.9, "lr": 0.01, "server_lr": 1.0, "tau": tau, "rounds": 100,
                "seed": seed, "aggregation": agg, "metric": metric, "value": value}
    last = {(0.4, 0, "AVG"): 80.0, (0.4, 1, "AVG"): 82.0, (0.0, 0, "GMA"): 80.0, (0.0, 1, "GMA"): 82.0,
            (0.4, 0, "GMA"): 81.0, (0.4, 1, "GMA"): 85.0}
    rows = [row(t, s, a, m, v + (4 if m == "best_global_acc" else 0)) for (t, s, a), v in last.items()
            for m in ("last10_global_acc", "best_global_acc")]
    results.write_table(tmp_path, "ablations_full", rows, results.provenance(command="abl --tables tau", scale="full data"))
    n8 = [{**r, "varied": "clients", "value_varied": 10, "tau": 0.4} for r in rows if r["tau"] == 0.4]   # Table 8's rows
    results.write_table(tmp_path, "ablations_full", n8, results.provenance(command="abl --tables clients", scale="full data"),
                        merge=True)
    run_script(monkeypatch, "gma_table", tmp_path)
    out = capsys.readouterr().out
    fig3d = out[out.index("Fig. 3d"):]   # each printer names only the commands behind its own rows
    assert "<!-- abl --tables tau |" in fig3d and "--tables clients" not in fig3d
    assert "<!-- abl --tables clients |" in out[:out.index("Fig. 3d")] and "--tables tau" not in out[:out.index("Fig. 3d")]
    # by hand: AVG 81 ± 1.41 at every tau; tau 0 equals it (lead +0 ± 0); tau 0.4 83 ± 2.83, leads +1, +3
    # GMA at τ 0.4 against GMA at τ 0 of the same seed: 81 − 80, 85 − 82 -> +2 ± 1.41
    assert ("| 0 | 0.01 / 1 | 2 | 81.00 ± 1.41 | 81.00 ± 1.41 | +0.00 ± 0.00 | no | +0.00 ± 0.00 | "
            "85.00 ± 1.41 | 85.00 ± 1.41 |") in out
    assert ("| 0.4 | 0.01 / 1 | 2 | 83.00 ± 2.83 | 81.00 ± 1.41 | +2.00 ± 1.41 | yes | +2.00 ± 1.41 | "
            "87.00 ± 2.83 | 85.00 ± 1.41 |") in out
    assert "best τ here by the last-10 mean over seeds 0, 1: 0.4 (83.00" in out
    assert "| Table 8 | clients | 10 | 0.01 / 1 | 2 | 81.00 ± 1.41 | 83.00 ± 2.83 |" in out and "| — | tau |" not in out
    # before AVG's run has landed (it comes last) GMA's points print alone
    results.write_table(tmp_path, "ablations_full", [r for r in rows if r["aggregation"] == "GMA"],
                        results.provenance(command="abl", scale="full data"))
    run_script(monkeypatch, "gma_table", tmp_path)
    out = capsys.readouterr().out
    assert "| 0.4 | 0.01 / 1 | 2 | 83.00 ± 2.83 | — | — | — | +2.00 ± 1.41 | 87.00 ± 2.83 | — |" in out
    # AVG's run of one seed only (the other's has not landed): its mean says it stands for 1 of the row's 2 seeds
    results.write_table(tmp_path, "ablations_full", [r for r in rows if r["aggregation"] == "GMA" or r["seed"] == 0],
                        results.provenance(command="abl", scale="full data"))
    run_script(monkeypatch, "gma_table", tmp_path)
    out = capsys.readouterr().out
    assert "| 0.4 | 0.01 / 1 | 2 | 83.00 ± 2.83 | 80.00 (1 of 2 seeds) | — | — | +2.00 ± 1.41 |" in out


def tau_row(tau, seed, value):
    """One GMA last-10 row of a Fig. 3d sweep, for the hand counts below."""
    return {"varied": "tau", "value_varied": tau, "lr": 0.01, "server_lr": 1.0, "rounds": 100, "seed": seed,
            "aggregation": "GMA", "metric": "last10_global_acc", "value": value}


def test_fig3d_best_tau_leaves_out_a_tau_with_fewer_seeds():
    """A τ half-way through its seeds must not decide the winner, nor shrink the comparison to its own seeds: the
    best τ is taken among the τ with the most seeds, on the seeds they share. By hand: τ 0.2 ran seed 0 only (82,
    the best single number); over both seeds τ 0.4 leads τ 0 (83 against 81), and τ 0.2 is named as left out."""
    gt = results.load_script("gma_table")
    rows = [tau_row(0.0, 0, 80.0), tau_row(0.0, 1, 82.0), tau_row(0.4, 0, 81.0), tau_row(0.4, 1, 85.0),
            tau_row(0.2, 0, 82.0)]
    key, mean, seeds, left_out = gt.fig3d_best(rows)
    assert (key[0], mean, seeds, left_out) == (0.4, 83.0, [0, 1], [0.2])
    assert gt.fig3d_best(rows[:4])[:4] == ((0.4, 0.01, 1.0, 100), 83.0, [0, 1], [])
    assert gt.fig3d_best([tau_row(0.0, 0, 80.0), tau_row(0.4, 1, 81.0)]) is None   # no seed in common: no verdict
    # a diverged seed (value None) takes its τ out of the running rather than counting as a number
    assert gt.fig3d_best([*rows[:3], tau_row(0.4, 1, None)])[0][0] == 0.0
    assert gt.fig3d_best([]) is None


def test_fig3d_lead_is_gma_against_tau_0_of_the_same_seed_by_hand():
    """The lead over τ = 0 pairs each seed with itself (τ = 0 is plain averaging on that seed's device): τ 0.4
    has 81 − 80 and 85 − 82 (+2 ± 1.41); τ 0.2 ran seed 0 only (82 − 80); a seed without τ = 0 counts for
    nothing."""
    gt = results.load_script("gma_table")
    rows = [tau_row(0.0, 0, 80.0), tau_row(0.0, 1, 82.0), tau_row(0.4, 0, 81.0), tau_row(0.4, 1, 85.0),
            tau_row(0.2, 0, 82.0), tau_row(0.2, 5, 99.0)]
    assert gt.value_fig3d_lead(rows, "0.4") == "+2.00 ± 1.41, 2 seeds"
    assert gt.value_fig3d_lead(rows, "0.2") == "+2.00, 1 seed"
    with pytest.raises(SystemExit, match="fig3d-lead 0.7: 0 tau sweeps"):
        gt.value_fig3d_lead(rows, "0.7")


def test_per_seed_fills_table_9s_e_1_from_table_8s_n_10_and_pairs_avg_with_every_tau():
    """What the README's ablation figure plots, by hand: Table 9 has E = 3 rows of its own, so its E = 1 point is
    Table 8's N = 10 runs (the same settings, trained once); a diverged run reads None, not a number; the tau
    sweep's one AVG run of a seed stands beside GMA at every tau it ran."""
    gt = results.load_script("gma_table")

    def row(varied, v, seed, agg, value, metric="last10_global_acc"):
        return {"varied": varied, "value_varied": v, "lr": 0.01, "server_lr": 1.0, "rounds": 100, "seed": seed,
                "aggregation": agg, "metric": metric, "value": value}
    rows = [row("clients", 10, 0, "AVG", 80.0), row("clients", 10, 0, "GMA", 81.0), row("clients", 10, 1, "AVG", 70.0),
            row("clients", 10, 1, "GMA", None), row("clients", 10, 0, "AVG", 90.0, "best_global_acc"),
            row("epochs", 3, 0, "AVG", 78.0), row("epochs", 3, 0, "GMA", 77.5),
            row("tau", 0.0, 0, "GMA", 80.0), row("tau", 0.4, 0, "GMA", 82.0), row("tau", 0.4, 0, "AVG", 79.0)]
    assert gt.per_seed(rows, "epochs") == {(1, 0.01, 1.0, 100): {"AVG": {0: 80.0, 1: 70.0}, "GMA": {0: 81.0, 1: None}},
                                           (3, 0.01, 1.0, 100): {"AVG": {0: 78.0}, "GMA": {0: 77.5}}}
    assert gt.per_seed(rows, "clients") == {(10, 0.01, 1.0, 100): {"AVG": {0: 80.0, 1: 70.0},
                                                                   "GMA": {0: 81.0, 1: None}}}
    assert gt.per_seed(rows, "clients", "best_global_acc") == {(10, 0.01, 1.0, 100): {"AVG": {0: 90.0}}}
    assert gt.per_seed(rows, "momentum") == {}   # Table 6 has no rows of its own: no copied base point
    assert gt.per_seed(rows, "tau") == {(0.0, 0.01, 1.0, 100): {"GMA": {0: 80.0}, "AVG": {0: 79.0}},
                                        (0.4, 0.01, 1.0, 100): {"GMA": {0: 82.0}, "AVG": {0: 79.0}}}
    with pytest.raises(ValueError, match="varied: got 'lr'"):
        gt.per_seed(rows, "lr")


def test_one_aggregation_per_job_gives_the_rows_of_the_batched_pair(abl, tmp_path):
    """AVG and GMA in two jobs (two CPU cores) against the two batched in one: the same rows, and the same numbers
    up to what float32 rounding can move on 100 stand-in test images."""
    pair = _args(tmp_path / "pair", "--tables", "epochs", "--epochs", "2")
    abl.main(pair)
    for agg in ("GMA", "AVG"):   # the second job's rows merge into the first's table
        abl.main(_args(tmp_path / "split", "--tables", "epochs", "--epochs", "2", "--aggregations", agg))
    both, _ = results.read_table(tmp_path / "pair" / "res", "ablations_full")
    split, meta = results.read_table(tmp_path / "split" / "res", "ablations_full")
    key = lambda r: (r["value_varied"], r["seed"], r["aggregation"], r["metric"])
    assert sorted(map(key, split)) == sorted(map(key, both)) and len(both) == 2 * 2 * 2
    got = {key(r): r["value"] for r in split}
    assert all(abs(got[key(r)] - r["value"]) <= 2.0 for r in both)
    assert "--aggregations AVG" in meta["command"]


def test_tau_table_with_one_aggregation(abl, tmp_path):
    abl.main(_args(tmp_path, "--tables", "tau", "--taus", "0.2", "--aggregations", "AVG"))
    rows, _ = results.read_table(tmp_path / "res", "ablations_full")
    assert {(r["tau"], r["aggregation"]) for r in rows} == {(0.4, "AVG")}   # AVG runs once, at --tau, not at 0.2


def test_unknown_aggregation_is_refused(abl, tmp_path, capsys):
    with pytest.raises(SystemExit):
        abl.main(["--aggregations", "median", "--out-root", str(tmp_path), "--no-write"])
    assert "--aggregations: invalid choice: 'median'" in capsys.readouterr().err
