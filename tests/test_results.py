"""results/ tables: tidy CSV + provenance JSON, read back equal, summarized as by hand."""
import json
import statistics
from pathlib import Path

import pytest

from fltutor import results


def run_script(monkeypatch, name, folder):
    """Run scripts/<name>.py's main() on the tables in ``folder``, as `python scripts/<name>.py --folder ...` would."""
    import importlib.util
    import sys
    from pathlib import Path
    spec = importlib.util.spec_from_file_location(name, Path(__file__).parents[1] / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.setattr(sys, "argv", [f"{name}.py", "--folder", str(folder)])
    mod.main()


def _rows():
    return [{"dataset": "mnist", "method": m, "seed": s, "metric": "auc", "value": v}
            for m, vals in (("fedavg", [0.61, 0.65, 0.58]), ("waffle_ibp", [0.52, 0.50, None]))
            for s, v in enumerate(vals)]


def test_write_then_read_gives_the_rows_and_the_provenance(tmp_path):
    meta = results.provenance(command="python -m fltutor run 05", wall_s=12.345, seeds=3)
    csv_path, json_path = results.write_table(tmp_path / "waffle_ibp", "table3", _rows(), meta)
    rows, got = results.read_table(tmp_path / "waffle_ibp", "table3")
    assert rows == _rows()
    assert got["command"] == "python -m fltutor run 05" and got["wall_s"] == 12.3 and got["seeds"] == 3
    assert got["rows"] == 6 and got["columns"] == ["dataset", "method", "seed", "metric", "value"]
    for key in ("fltutor_version", "commit", "device", "date"):
        assert got[key]
    assert sorted(p.name for p in (tmp_path / "waffle_ibp").iterdir()) == ["table3.csv", "table3.json"]  # no temp files
    assert json.loads(json_path.read_text())["table"] == "table3.csv"
    assert csv_path.read_text().splitlines()[0] == "dataset,method,seed,metric,value"


def test_summarize_matches_the_statistics_module():
    s = results.summarize(_rows(), by=("method",), metric="auc")
    assert s[("fedavg",)]["mean"] == pytest.approx(statistics.mean([0.61, 0.65, 0.58]))
    assert s[("fedavg",)]["sd"] == pytest.approx(statistics.stdev([0.61, 0.65, 0.58]))
    assert s[("waffle_ibp",)] == {"mean": pytest.approx(0.51), "sd": pytest.approx(statistics.stdev([0.52, 0.50])), "n": 2,
                                  "missing": 1}   # seed 2 wrote no value
    assert results.summarize(_rows(), by=("method",), metric="accuracy") == {}


def test_summarize_counts_a_diverged_seed_instead_of_averaging_over_it():
    rows = [{"method": "gma", "seed": s, "metric": "acc", "value": v} for s, v in enumerate([80.0, None, 70.0])]
    got = results.summarize(rows, by=("method",), metric="acc")[("gma",)]
    assert got["n"] == 2 and got["missing"] == 1 and got["mean"] == pytest.approx(75.0)


def test_summarize_refuses_a_seed_counted_twice_in_one_group():
    # two runs of seed 0 labelled apart ("variant"), then pooled without that column: n would read 3, not 2
    rows = [{"method": "waffle_ibp", "variant": v, "seed": s, "metric": "acc", "value": x}
            for v, s, x in (("alpha/F 0.8", 0, 90.0), ("alpha/F 0.4, F 80", 0, 91.0), ("alpha/F 0.4, F 80", 1, 92.0))]
    assert results.summarize(rows, by=("method", "variant"), metric="acc")[("waffle_ibp", "alpha/F 0.4, F 80")]["n"] == 2
    with pytest.raises(ValueError, match=r"seed 0 appears twice in the group \{'method': 'waffle_ibp'\}"):
        results.summarize(rows, by=("method",), metric="acc")
    # the same seed under two metrics is not a repeat
    assert results.summarize(rows[:1] + [{**rows[0], "metric": "loss"}], by=("method",))[("waffle_ibp",)]["n"] == 2


def test_a_missing_table_reads_as_none(tmp_path):
    assert results.read_table(tmp_path, "nothing") is None


@pytest.mark.parametrize("rows, match", [([], "at least one row"),
                                         ([{"method": "fedavg", "value": 1.0}], "'metric' column"),
                                         ([{"metric": "a", "value": 1}, {"value": 1, "metric": "a"}], "row 1")])
def test_bad_rows_are_refused_before_anything_is_written(tmp_path, rows, match):
    with pytest.raises(ValueError, match=match):
        results.write_table(tmp_path, "t", rows, {})
    assert not any(tmp_path.iterdir())


def test_every_committed_table_says_how_it_was_made():
    """Each results/<paper>/<table>.csv has its JSON beside it, and the JSON counts the rows it describes."""
    tables = sorted(results.RESULTS_DIR.glob("*/*.csv"))
    for path in tables:
        rows, meta = results.read_table(path.parent, path.stem)
        for key in ("command", "fltutor_version", "commit", "device", "date", "wall_s"):
            assert meta.get(key) not in (None, ""), f"{path}: the JSON lacks {key}"
        assert meta["rows"] == len(rows) and meta["columns"] == list(rows[0]), path
        assert all(r["value"] is None or isinstance(r["value"], (int, float)) for r in rows), path


def test_gma_table_script_prints_the_grid_with_spread_and_the_papers_values(tmp_path, capsys, monkeypatch):
    rows = [{"aggregation": agg, "server_lr": 2.0, "lr": 0.01, "seed": s, "metric": "best_global_acc", "value": v}
            for agg, vals in (("AVG", [50.0, 52.0]), ("GMA", [60.0, 61.0])) for s, v in zip((0, 1), vals)]
    results.write_table(tmp_path, "table10", rows, results.provenance(command="test", scale="reduced scale: test"))
    run_script(monkeypatch, "gma_table", tmp_path)
    out = capsys.readouterr().out
    assert "reduced scale: test" in next(line for line in out.splitlines() if line.startswith("<!--"))
    # means 51 and 60.5, sds 1.41 and 0.71: the lead of 9.5 is beyond 2.12; the paper's cell is 82.42 / 86.9
    assert "| 2 | 0.01 | 51.00 ± 1.41 | 60.50 ± 0.71 | +9.50 | yes | — | — | 82.42 / 86.9 |" in out


def test_gma_table_script_keeps_a_grid_at_another_client_momentum_apart(tmp_path, capsys, monkeypatch):
    # rows without a momentum (written before the column) are the paper's 0.9; a momentum-0 grid must not pool
    rows = [{"aggregation": agg, "server_lr": 1.0, "lr": 0.1, "momentum": m, "seed": 0, "metric": "best_global_acc",
             "value": v} for agg, m, v in (("AVG", None, 10.0), ("GMA", None, 12.0), ("AVG", 0.0, 80.0), ("GMA", 0.0, 84.0))]
    results.write_table(tmp_path, "table10", rows, results.provenance(command="test", scale="reduced scale: test"))
    run_script(monkeypatch, "gma_table", tmp_path)
    out = capsys.readouterr().out
    assert out.index("client momentum 0.9 (the paper's)") < out.index("| 1 | 0.1 | 10.00 | 12.00 | +2.00 |") \
        < out.index("client momentum 0\n") < out.index("| 1 | 0.1 | 80.00 | 84.00 | +4.00 |")


def test_gma_table_script_reads_each_best_off_its_curve_by_hand(tmp_path, capsys, monkeypatch):
    # 100-round curves of one cell, seed 0 each: AVG climbs slowly to 85 at round 60, then swings down to 70;
    # GMA leads early (81 at round 12) and ends at 83; a second GMA seed diverges after round 30
    def curve(agg, seed, acc):
        return [{"aggregation": agg, "server_lr": 2.0, "lr": 0.01, "momentum": 0.9, "seed": seed, "rounds": 100,
                 "round": t, "metric": "global_acc", "value": acc(t)} for t in range(1, 101 if seed == 0 else 31)]
    rows = (curve("AVG", 0, lambda t: 85.0 if t == 60 else 70.0 if t == 100 else min(t, 79))
            + curve("GMA", 0, lambda t: 81.0 if t == 12 else 83.0 if t == 100 else min(t, 78))
            + curve("GMA", 1, lambda t: float(t)))
    results.write_table(tmp_path, "table10_curves", rows, results.provenance(command="test", scale="full scale"))
    run_script(monkeypatch, "gma_table", tmp_path)
    out = capsys.readouterr().out
    # AVG: best by 15 is 15 (min(t, 79)), by 50 is 50, best 85 (round 60), last 70, never at 80 before round 60
    assert "| 0.9 | 100 | 2 | 0.01 | AVG | 0 | 15.0 | 50.0 | 85.0 | 70.0 | 60 |" in out
    # GMA seed 0: 81 at round 12 (first >= 80); seed 1's curve stops at round 30 (diverged), never reaches 80
    assert "| 0.9 | 100 | 2 | 0.01 | GMA | 0, 1 | 81.0 / 15.0 | 81.0 / 30.0 | 83.0 / 30.0 | 83.0 / 30.0 (round 30) | 12 / – |" in out
    # seed by seed over the seed both ran (0): 81 − 15, 81 − 50, 83 − 85, 83 − 70
    assert "| 0.9 | 100 | 2 | 0.01 | GMA − AVG | 0 | +66.00 | +31.00 | -2.00 | +13.00 | |" in out


def test_gma_table_script_measures_how_much_each_curve_swings_by_hand(tmp_path, capsys, monkeypatch):
    # after round 50 AVG alternates 80, 84, 80, ... (sd 2, every other round falls by 4); GMA climbs 81.0, 81.1, ...
    # by 0.1 a round (never falls; sd of 50 equally spaced values, step 0.1: 0.1 * sqrt((50^2 - 1) / 12) = 1.443);
    # a second AVG seed that stops at round 40 (diverged) has no tail and is left out
    def curve(agg, seed, acc, last=100):
        return [{"aggregation": agg, "server_lr": 1.5, "lr": 0.1, "momentum": 0.0, "seed": seed, "rounds": 100,
                 "round": t, "metric": "global_acc", "value": acc(t)} for t in range(1, last + 1)]
    rows = (curve("AVG", 0, lambda t: 80.0 if t % 2 else 84.0) + curve("AVG", 1, float, last=40)
            + curve("GMA", 0, lambda t: 81.0 + 0.1 * (t - 51) if t > 50 else 70.0))
    results.write_table(tmp_path, "table10_momentum0_curves", rows, results.provenance(command="test", scale="full scale"))
    run_script(monkeypatch, "gma_table", tmp_path)
    out = capsys.readouterr().out
    assert "How much each curve swings after round 50" in out
    assert "| 0 | 100 | 1.5 | 0.1 | 0 | 2.00 | 1.44 | 4.00 | 0.00 |" in out


def test_gma_table_script_finds_the_round_at_which_our_curves_match_the_papers_cell(tmp_path, capsys, monkeypatch):
    # AVG's accuracy at round t is t, GMA's t + 4.48: the best so far is R and R + 4.48, so the paper's 82.42 / 86.90
    # (server 2, client 0.01) are matched best at R = 82 (|82 - 82.42| = 0.42 for both), where GMA leads by 4.48
    rows = [{"aggregation": agg, "server_lr": 2.0, "lr": 0.01, "momentum": 0.9, "seed": 0, "rounds": 100, "round": t,
             "metric": "global_acc", "value": t + shift} for agg, shift in (("AVG", 0.0), ("GMA", 4.48)) for t in range(1, 101)]
    results.write_table(tmp_path, "table10_curves", rows, results.provenance(command="test", scale="full scale"))
    run_script(monkeypatch, "gma_table", tmp_path)
    out = capsys.readouterr().out
    assert ("momentum 0.9, 100 rounds: the paper's 2 values are closest to our best-so-far at round 82 (rms 0.42 points); "
            "GMA − AVG there: server 2 / client 0.01: +4.48 (paper +4.48)") in out
    # cell by cell: AVG's best-so-far R first reaches 82.42 at R = 83; GMA's R + 4.48 passes 86.90 at R = 83 too
    # (82 + 4.48 = 86.48 falls short)
    assert ("first round at which our mean best-so-far reaches the paper's value, AVG / GMA: server 2 / client 0.01: "
            "round 83 / round 83") in out
    # a curve that stays below the paper's value is said to, with its level at the last round
    flat = [dict(r, value=50.0) for r in rows]
    results.write_table(tmp_path, "table10_curves", flat, results.provenance(command="test", scale="full scale"))
    run_script(monkeypatch, "gma_table", tmp_path)
    assert "server 2 / client 0.01: not by 100 (50.0 < 82.42) / not by 100 (50.0 < 86.90)" in capsys.readouterr().out


def _two_grids(folder):
    """table10 as a 15-round CPU grid, then the paper's 100-round grid merged in: seeds 0-1 in each."""
    def grid(rounds, vals):
        return [{"aggregation": agg, "server_lr": 1.0, "lr": 0.01, "momentum": 0.9, "seed": s, "rounds": rounds,
                 "metric": "best_global_acc", "value": v} for agg, pair in vals.items() for s, v in zip((0, 1), pair)]
    results.write_table(folder, "table10", grid(15, {"AVG": [40.0, 44.0], "GMA": [41.0, 43.0]}),
                        results.provenance(command="cpu", scale="reduced scale: 15 rounds",
                                           settings={"grid_rounds": 15}), merge=True)
    results.write_table(folder, "table10", grid(100, {"AVG": [80.0, 82.0], "GMA": [85.0, 89.0]}),
                        results.provenance(command="gpu", scale="full scale", settings={"grid_rounds": 100}), merge=True)
    return results.read_table(folder, "table10")


def test_a_table_with_grids_at_two_scales_keeps_them_apart_each_with_its_own_label(tmp_path):
    rows, meta = _two_grids(tmp_path)
    assert len(rows) == 8 and [p["command"] for p in meta["parts"]] == ["cpu", "gpu"]
    by = ["aggregation", "server_lr", "lr", "momentum"]
    with pytest.raises(ValueError, match="seed 0 appears twice"):   # what grouping without the rounds did
        results.summarize(rows, by, "best_global_acc")
    got = {(k["aggregation"], k["rounds"]): (st["mean"], st["n"], label)
           for k, st, label in results.summarize_by_scale(rows, meta, by, "best_global_acc", rounds_setting="grid_rounds")}
    assert got == {("AVG", 15): (42.0, 2, "reduced scale"), ("GMA", 15): (42.0, 2, "reduced scale"),
                   ("AVG", 100): (81.0, 2, "full scale"), ("GMA", 100): (87.0, 2, "full scale")}
    # a group no command's settings describe is not given another group's label
    assert results.scale_label(meta, grid_rounds=50) == "scale unrecorded"


def test_tables_2_3_rows_take_the_label_of_the_command_that_ran_their_row_and_algorithm(tmp_path):
    """Three commands at 200 rounds, each its own rows: a FedAvg pair, FedYogi on the same row, FedAvg on another.
    Matching on the rounds alone gave every group the newest command's label (FedYogi's, on FedAvg rows too)."""
    def part(ds, algo, note, date):
        rows = [{"dataset": ds, "skew": "label", "clients": 500, "algorithm": algo, "aggregation": agg, "seed": s,
                 "rounds": 200, "metric": "best_global_acc", "value": 90.0 + s}
                for agg in ("AVG", "GMA") for s in (0, 1)]
        meta = results.provenance(command=f"{ds} {algo}", scale=f"{note}: more words",
                                  settings={"settings": [(ds, "label", 500)], "algorithms": [algo], "rounds": 200})
        meta["date"] = date
        results.write_table(tmp_path, "tables2_3", rows, meta, merge=True)
    part("mnist", "fedavg", "FedAvg at a shared pair", "2026-01-01")
    part("mnist", "fedyogi", "FedYogi at a shared pair", "2026-01-02")
    part("fashionmnist", "fedavg", "FedAvg, FMNIST", "2026-01-03")
    rows, meta = results.read_table(tmp_path, "tables2_3")
    by = ["dataset", "skew", "clients", "algorithm", "aggregation"]
    holds = lambda k: {"settings": [k["dataset"], k["skew"], k["clients"]], "algorithms": k["algorithm"]}  # noqa: E731
    got = {(k["dataset"], k["algorithm"], k["aggregation"]): label
           for k, _, label in results.summarize_by_scale(rows, meta, by, "best_global_acc", holds=holds)}
    want = {("mnist", "fedavg"): "FedAvg at a shared pair", ("mnist", "fedyogi"): "FedYogi at a shared pair",
            ("fashionmnist", "fedavg"): "FedAvg, FMNIST"}
    assert got == {(*k, agg): label for k, label in want.items() for agg in ("AVG", "GMA")}
    unmatched = {label for _, _, label in results.summarize_by_scale(rows, meta, by, "best_global_acc")}
    assert unmatched == {"FedAvg, FMNIST"}                  # the old behaviour: the newest command's label everywhere
    assert results.scale_label(meta, holds={"algorithms": "fedprox"}, rounds=200) == "scale unrecorded"


def test_gma_table_script_prints_the_papers_grid_and_a_cpu_grid_apart(tmp_path, capsys, monkeypatch):
    _two_grids(tmp_path)
    run_script(monkeypatch, "gma_table", tmp_path)
    out = capsys.readouterr().out
    # by hand: 100 rounds AVG 81 ± 1.41, GMA 87 ± 2.83, lead +6 > 4.24; 15 rounds 42 ± 2.83 both, lead 0
    full = out.index("100 rounds (full scale)")
    assert full < out.index("| 1 | 0.01 | 81.00 ± 1.41 | 87.00 ± 2.83 | +6.00 | yes |") \
        < out.index("15 rounds (reduced scale)") < out.index("| 1 | 0.01 | 42.00 ± 2.83 | 42.00 ± 1.41 | +0.00 | no |")


def _selection_grid(folder, name="table10", momentum=0.9):
    """A 100-round Table 10 grid, seeds 0-1, whose held-out scores make the two selection rules pick apart. Pairs
    (server, client): P1 (1, 0.01), P2 (2, 0.01), P3 (1, 0.1), where AVG's seed 0 and both GMA seeds diverge
    (AVG's seed 1 scores 99 on the held-out splits there, which no rule may pick)."""
    cells = {  # (aggregation, server lr, client lr): per seed (held-out best, test best, test last 10) or None
        ("AVG", 1.0, 0.01): [(80.0, 81.0, 79.0), (70.0, 71.0, 69.0)],
        ("AVG", 2.0, 0.01): [(78.0, 77.0, 76.0), (76.0, 75.0, 74.0)],
        ("AVG", 1.0, 0.1): [None, (99.0, 99.0, 99.0)],
        ("GMA", 1.0, 0.01): [(75.0, 76.0, 74.0), (79.0, 80.0, 78.0)],
        ("GMA", 2.0, 0.01): [(78.0, 78.0, 77.0), (70.0, 69.0, 68.0)],
        ("GMA", 1.0, 0.1): [None, None]}
    rows = []
    for (agg, g, l), per_seed in cells.items():
        for s, v in enumerate(per_seed):
            base = {"aggregation": agg, "server_lr": g, "lr": l, "momentum": momentum, "seed": s, "rounds": 100}
            vals = dict(zip(("best_local_acc", "best_global_acc", "last10_global_acc"), v or (None,) * 3))
            rows += [{**base, "metric": k, "value": x} for k, x in
                     {**vals, "diverged_round": None if v else 1}.items()]
    results.write_table(folder, name, rows, results.provenance(command="test", scale="full scale",
                                                               settings={"grid_rounds": 100}))


def test_gma_table_picks_each_aggregations_pair_on_held_out_data_by_hand(tmp_path, capsys, monkeypatch):
    _selection_grid(tmp_path)
    gt = results.load_script("gma_table")
    rows = results.read_table(tmp_path, "table10")[0]
    # first seed: AVG 80 (P1) > 78 (P2); GMA 78 (P2) > 75 (P1); shared P2 156 > P1 155; P3 diverged in seed 0
    assert gt.held_out_picks(rows, "seed0") == {"seeds": [0], "AVG": (1.0, 0.01), "GMA": (2.0, 0.01),
                                                "shared": (2.0, 0.01)}
    # mean over seeds: AVG P2 77 > P1 75 (P3's 99 has a diverged seed); GMA P1 77 > P2 74; shared P1 152 > 151
    assert gt.held_out_picks(rows, "mean") == {"seeds": [0, 1], "AVG": (2.0, 0.01), "GMA": (1.0, 0.01),
                                               "shared": (1.0, 0.01)}
    monkeypatch.setattr("sys.argv", ["gma_table.py", "--folder", str(tmp_path), "--section", "table10_selected"])
    gt.main()
    out = capsys.readouterr().out
    paper = "| 87.43 / 88.37 (+0.94) |"
    # seed 0's picks: AVG at P1 tests (81, 71), GMA at P2 (78, 69); seed by seed -3, -2: -2.50 ± 0.71, beyond it
    assert ("| AVG 0.01 / 1, GMA 0.01 / 2 | 2 | 76.00 ± 7.07 | 73.50 ± 6.36 | -2.50 ± 0.71 | yes | 74.00 ± 7.07 | "
            "72.50 ± 6.36 " + paper) in out
    # shared P2: AVG (77, 75), GMA (78, 69): +1, -6
    assert "| 0.01 / 2 (shared) | 2 | 76.00 ± 1.41 | 73.50 ± 6.36 | -2.50 ± 4.95 | no |" in out
    # mean rule: AVG at P2 (77, 75), GMA at P1 (76, 80): -1, +5; shared P1: AVG (81, 71), GMA (76, 80): -5, +9
    assert "| AVG 0.01 / 2, GMA 0.01 / 1 | 2 | 76.00 ± 1.41 | 78.00 ± 2.83 | +2.00 ± 4.24 | no |" in out
    assert "| 0.01 / 1 (shared) | 2 | 76.00 ± 7.07 | 78.00 ± 2.83 | +2.00 ± 9.90 | no |" in out
    for argv, want in ((["selected"], "−2.50 ± 0.71, 2 seeds (AVG at 0.01 / 1, GMA at 0.01 / 2)"),
                       (["selected", "mean", "shared"], "+2.00 ± 9.90, 2 seeds (both at 0.01 / 1)")):
        monkeypatch.setattr("sys.argv", ["gma_table.py", "--folder", str(tmp_path), "--value", *argv])
        gt.main()
        assert capsys.readouterr().out.strip() == want
    # the momentum-0 grid has its own table; its value names the momentum, and the paper's 0.9 is not there
    _selection_grid(tmp_path, "table10_momentum0", 0.0)
    monkeypatch.setattr("sys.argv", ["gma_table.py", "--folder", str(tmp_path), "--value", "selected-momentum0",
                                     "seed0", "own", "100", "0"])
    gt.main()
    assert capsys.readouterr().out.strip() == "−2.50 ± 0.71, 2 seeds (AVG at 0.01 / 1, GMA at 0.01 / 2)"
    monkeypatch.setattr("sys.argv", ["gma_table.py", "--folder", str(tmp_path), "--value", "selected-momentum0"])
    with pytest.raises(SystemExit, match="no cell to pick in the 100-round grid at client momentum 0.9"):
        gt.main()
    monkeypatch.setattr("sys.argv", ["gma_table.py", "--folder", str(tmp_path), "--value", "selected", "best"])
    with pytest.raises(SystemExit, match="RULE is seed0 or mean and CHOICE own or shared; got 'best'"):
        gt.main()


def test_waffle_ibp_table_script_against_a_table_computed_by_hand(tmp_path, capsys, monkeypatch):

    def row(mode, method, seed, metric, value, variant="", minority="0-2-4-6-8"):
        return {"dataset": "mnist", "mode": mode, "method": method, "variant": variant,
                "minority_classes": minority if mode == "multimodal" else "", "seed": seed, "metric": metric, "value": value}
    rows = [row("unimodal", "fedavg", s, "local_acc", v) for s, v in ((0, 94.0), (1, 96.0))]
    rows += [row("multimodal", "fedavg", s, m, v) for s, vals in ((0, (90.0, 60.0)), (1, (92.0, 70.0)))
             for m, v in zip(("local_acc", "minority"), vals)]
    rows += [row("multimodal", "fedavg", 0, "minority", 50.0, minority="5-6-7-9")]
    rows += [row("multimodal", "waffle_ibp", 0, "minority", 97.0), row("multimodal", "waffle_ibp", 1, "minority", None),
             row("multimodal", "waffle_ibp", 1, "diverged_round", 7)]
    results.write_table(tmp_path, "tables1_2", rows, results.provenance(command="test", scale="full scale"))
    run_script(monkeypatch, "waffle_ibp_table", tmp_path)
    out = capsys.readouterr().out
    # by hand: unimodal 95 ± 1.41 vs the paper's 94.46 ± 0.84 (|0.54| < 2.25: no); multimodal 91 ± 1.41 vs
    # 91.57 ± 1.42 (no); minority 65 ± 7.07 vs 67.4 (no); WAFFLe's seed 1 diverged, so no mean
    assert "| mnist | fedavg | 2/2 | 95.00 ± 1.41 | 94.46 | no | 91.00 ± 1.41 | 91.57 | no |" in out
    assert "| mnist | fedavg | 2 | — / 96.63 | 65.00 ± 7.07 / 67.4 | no |" in out
    assert "| mnist | fedavg (minority 5-6-7-9) | 1 | — / 96.63 | 50.00 / 67.4 | n/a (1 seed) |" in out
    assert "| mnist | waffle_ibp | 2 | — / 95.93 | diverged in 1 of 2 / 93.87 | — |" in out


def test_paired_difference_is_seed_by_seed_and_counts_lost_seeds():
    rows = [{"g": "x", "method": m, "seed": s, "metric": "acc", "value": v}
            for m, vals in (("a", (90.0, 80.0, 70.0, 60.0)), ("b", (85.0, 79.0, None, 50.0))) for s, v in enumerate(vals)]
    rows.append({"g": "x", "method": "a", "seed": 0, "metric": "other", "value": 0.0})
    st = results.paired_difference(rows, ["g"], "method", "a", "b", "acc")[("x",)]
    # seeds 0, 1, 3: leads 5, 1, 10 (mean 16/3, sample sd sqrt(((-1/3)^2 + (-13/3)^2 + (14/3)^2) / 2)); seed 2 lost
    assert st["n"] == 3 and st["missing"] == 1
    assert (st["min"], st["max"]) == (1.0, 10.0)
    assert abs(st["mean"] - 16 / 3) < 1e-12
    assert abs(st["sd"] - ((1 / 9 + 169 / 9 + 196 / 9) / 2) ** 0.5) < 1e-12
    # the sd of the lead is not the sd of either mean: both methods swing together from seed to seed
    assert st["sd"] < results.summarize(rows, ["method"], "acc")[("a",)]["sd"]


def test_waffle_ibp_table_script_prints_fig7_lead_by_z(tmp_path, capsys, monkeypatch):
    ada = "adam 0.1, KL 0.1, alpha/F 0.8, T 0.667"

    def row(method, seed, value, variant="", z=None):
        return {"dataset": "mnist", "mode": "unimodal", "method": method, "variant": variant, "minority_classes": "",
                **({} if z is None else {"shards_per_client": z}), "seed": seed, "metric": "local_acc", "value": value}
    t12 = [row("fedavg", s, v) for s, v in ((0, 94.0), (1, 95.0))]
    t12 += [row("waffle_ibp", s, v, ada) for s, v in ((0, 97.0), (1, 96.5))]
    t12 += [row("waffle_ibp", s, 50.0, "sgd shared lr, KL 1") for s in (0, 1)]   # another variant: not this figure's
    results.write_table(tmp_path, "tables1_2", t12, results.provenance(command="t12", scale="full scale"))
    z = [row("fedavg", s, v, z=3) for s, v in ((0, 96.0), (1, 97.0))]
    z += [row("waffle_ibp", s, v, ada, z=3) for s, v in ((0, 97.0), (1, 99.0))]
    results.write_table(tmp_path, "heterogeneity", z, results.provenance(command="z3", scale="full scale"))
    run_script(monkeypatch, "waffle_ibp_table", tmp_path)
    out = capsys.readouterr().out
    # Z = 2: leads 3.0 and 1.5 (mean 2.25, sd 1.06); the paper's Table 2 MNIST unimodal lead 96.23 - 94.46 = 1.77
    assert "| mnist | 2 | 2 | 94.50 ± 0.71 | 96.75 ± 0.35 | +2.25 ± 1.06 | +1.77 | — |" in out
    # Z = 3: leads 1 and 2 (1.50 ± 0.71); the paper's only Z = 3 number is CIFAR-10's +7.20
    assert "| mnist | 3 | 2 | 96.50 ± 0.71 | 98.00 ± 1.41 | +1.50 ± 0.71 | — | +7.20 |" in out
    assert "<!-- z3 |" in out


def test_gma_table_script_prints_tables2_3_with_the_lead_seed_by_seed(tmp_path, capsys, monkeypatch):
    def row(agg, seed, metric, value, lr=0.05, server_lr=1.0, choice="fixed"):
        return {"dataset": "mnist", "skew": "label", "clients": 500, "algorithm": "fedavg", "aggregation": agg,
                "lr_choice": choice, "lr": lr, "server_lr": server_lr, "seed": seed, "rounds": 200, "metric": metric,
                "value": value}
    rows = [row(agg, s, "best_global_acc", v) for agg, vals in (("AVG", (97.0, 95.0, 96.0)), ("GMA", (97.5, 96.0, 96.0)))
            for s, v in enumerate(vals)]
    rows += [row(agg, s, "last10_global_acc", v - 1) for agg, vals in (("AVG", (97.0, 95.0, 96.0)),) for s, v in enumerate(vals)]
    # the same setting at another shared pair: its own row, never pooled with the first; a GMA seed diverged there
    rows += [row("AVG", s, "best_global_acc", 90.0 + s, server_lr=2.0) for s in range(2)]
    rows += [row("GMA", 0, "best_global_acc", 93.0, server_lr=2.0), row("GMA", 1, "best_global_acc", None, server_lr=2.0),
             row("GMA", 1, "diverged_round", 12, server_lr=2.0)]
    results.write_table(tmp_path, "tables2_3", rows, results.provenance(command="test", scale="full data: test"))
    run_script(monkeypatch, "gma_table", tmp_path)
    out = capsys.readouterr().out
    assert "Table 10" not in out and "full data: test" in out
    # by hand: AVG 96 ± 1, GMA 96.5 ± 0.866; leads 0.5, 1, 0: mean 0.5, sd 0.5 (not beyond: |0.5| is not > 0.5);
    # AVG last-10 95 ± 1; the paper's MNIST-500 FedAvg is 96.24 / 97.36
    assert ("| MNIST, 2-class, 500 clients | FedAvg | 0.05 / 1 (fixed) | 3 | 96.00 ± 1.00 | 96.50 ± 0.87 | +0.50 ± 0.50 | no | "
            "95.00 ± 1.00 | — | 96.24 / 97.36 (+1.12) |") in out
    assert "| MNIST, 2-class, 500 clients | FedAvg | 0.05 / 2 (fixed) | 1 | 90.50 ± 0.71 | 1 of 2 diverged | — | — |" in out


def test_gma_table_script_prints_fedcmnist_in_and_out_of_distribution_by_hand(tmp_path, capsys, monkeypatch):
    def row(skew, agg, seed, metric, value):
        return {"dataset": "mnist", "skew": skew, "clients": 500, "algorithm": "fedavg", "aggregation": agg,
                "lr_choice": "fixed", "lr": 0.05, "server_lr": 1.0, "seed": seed, "rounds": 200, "metric": metric,
                "value": value}
    # the shared map: held-out (same colours) 95 / 93, test (map reversed) 40 / 50 -> falls 55 and 43
    rows = [row("mixed-shared", "AVG", s, m, v) for s, vals in ((0, (96, 95, 60, 40)), (1, (94, 93, 70, 50)))
            for m, v in zip(("best_local_acc", "last10_local_acc", "best_global_acc", "last10_global_acc"), vals)]
    # one GMA seed diverged: no means for that aggregation
    rows += [row("mixed-shared", "GMA", 0, m, v) for m, v in (("best_local_acc", 90), ("last10_local_acc", 89),
                                                                ("best_global_acc", 70), ("last10_global_acc", 65))]
    rows += [row("mixed-shared", "GMA", 1, m, None) for m in ("best_local_acc", "last10_local_acc", "best_global_acc",
                                                                "last10_global_acc")]
    # an older own-colours row without the held-out last-10 metric; and a label-skew row, not FedCMNIST
    rows += [row("mixed", "AVG", 0, m, v) for m, v in (("best_local_acc", 97), ("best_global_acc", 96),
                                                        ("last10_global_acc", 95))]
    rows += [row("label", "AVG", 0, "best_global_acc", 90)]
    # feature-shared, both aggregations at 2 seeds, best only: falls AVG 10 / 7, GMA 16 / 5 -> +6, -2
    rows += [row("feature-shared", agg, s, m, v) for agg, vals in (("AVG", ((90, 80), (92, 85))), ("GMA", ((91, 75), (93, 88))))
             for s, (loc, glob) in enumerate(vals) for m, v in (("best_local_acc", loc), ("best_global_acc", glob))]
    results.write_table(tmp_path, "tables2_3", rows, results.provenance(command="test", scale="full data: test"))
    run_script(monkeypatch, "gma_table", tmp_path)
    out = capsys.readouterr().out.split("FedCMNIST in and out of distribution")[1]
    lines = [line for line in out.splitlines() if line.startswith("| mixed")]
    # own colours first; best: 97 / 96, fall 1; last 10: held-out unknown, test 95
    assert lines[0] == ("| mixed skew | own per client | 500 | fedavg | 0.05 / 1 (fixed) | AVG | 1 | 97.00 | 96.00 | 1.00 | "
                        "— | 95.00 | — |")
    # best: held-out 95 ± 1.41, test 65 ± 7.07, falls 36 and 24 -> 30 ± 8.49; last 10: 94 ± 1.41, 45 ± 7.07, 55 / 43
    assert lines[1] == ("| mixed skew | shared, reversed at test | 500 | fedavg | 0.05 / 1 (fixed) | AVG | 2 | 95.00 ± 1.41 | "
                        "65.00 ± 7.07 | 30.00 ± 8.49 | 94.00 ± 1.41 | 45.00 ± 7.07 | 49.00 ± 8.49 |")
    assert lines[2].endswith("| GMA | 2 | " + " | ".join(["1 of 2 diverged"] * 6) + " |")
    assert len(lines) == 3 and "| label skew" not in out
    # GMA's fall minus AVG's: +6 and -2 -> +2.00 ± 5.66; no line where a GMA seed diverged (mixed-shared)
    assert "feature-shared 500 fedavg: GMA's fall minus AVG's, seed by seed: best +2.00 ± 5.66 (GMA falls further in 1 of 2 seeds)" in out
    assert "mixed-shared 500 fedavg: GMA's fall" not in out


def test_provenance_comments_name_every_command_of_a_merged_table(tmp_path):
    one = results.provenance(command="run A", wall_s=1.0, scale="full scale")
    results.write_table(tmp_path, "t", [{"seed": 0, "metric": "m", "value": 1.0}], one, merge=True)
    two = results.provenance(command="run B", wall_s=2.0, scale="quick run")
    results.write_table(tmp_path, "t", [{"seed": 1, "metric": "m", "value": 2.0}], two, merge=True)
    lines = results.provenance_comments(results.read_table(tmp_path, "t")[1])
    assert len(lines) == 2 and all(line.startswith("<!-- ") and line.endswith(" -->") for line in lines)
    assert "run A | full scale |" in lines[0] and "| 1.0 s" in lines[0] and "run B | quick run |" in lines[1]
    assert results.provenance_comments({"command": "x"})[0].startswith("<!-- x |")   # a table without parts


def test_devices_names_each_device_with_its_command_count():
    cpu, gpu = {"device": "cpu: x86_64 x2 (Linux)"}, {"device": "cuda: NVIDIA H100 80GB HBM3"}
    assert results.devices({**cpu, "parts": [cpu, cpu, gpu]}) == \
        "cpu: x86_64 x2 (Linux) (2 commands); cuda: NVIDIA H100 80GB HBM3 (1 command)"
    assert results.devices({**gpu, "parts": [gpu, gpu]}) == "cuda: NVIDIA H100 80GB HBM3"   # one device: no counts
    assert results.devices(cpu) == "cpu: x86_64 x2 (Linux)"                                  # a table without parts


def test_scales_and_command_lines_name_every_command_not_just_the_newest():
    """A table of reduced-scale probes with full-scale runs merged in once read, in its header, as the newest
    command's scale alone ("reduced scale: 480 images per agent" over 60 full-data rows)."""
    small = {"command": "probe --images 480", "device": "cpu", "date": "d1", "commit": "a" * 40, "wall_s": 4.0,
             "scale": "reduced scale: 480 images per agent"}
    full = {**small, "command": "probe --images 0", "date": "d2", "commit": "b" * 40, "scale": "full scale"}
    meta = {**small, "parts": [full, small, full]}
    assert results.scales(meta) == "full scale (2 commands); reduced scale: 480 images per agent (1 command)"
    assert results.scales({**full, "parts": [full, full]}) == "full scale"
    assert results.scales({"command": "x"}) == "scale unrecorded"
    assert results.command_lines(meta, "t.csv") == [
        f"t.csv: probe --images 0 | cpu | d2 | commit {'b' * 10} | 4.0 s | full scale",
        f"t.csv: probe --images 480 | cpu | d1 | commit {'a' * 10} | 4.0 s | reduced scale: 480 images per agent",
        f"t.csv: probe --images 0 | cpu | d2 | commit {'b' * 10} | 4.0 s | full scale"]
    assert results.command_lines(small, "t.csv") == [results.command_lines(meta, "t.csv")[1]]   # no parts: itself
    assert results.command_lines(meta, "t.csv", most=3) == results.command_lines(meta, "t.csv")
    assert results.command_lines(meta, "t.csv", most=2) == [       # more commands than that: counted, not listed
        "t.csv: 3 commands, d1 to d2, each listed with its device, commit and wall time under `parts` in t.json",
        "  devices: cpu", "  scales: full scale (2 commands); reduced scale: 480 images per agent (1 command)"]
    assert results.command_lines({**small, "note": "resumed"}, "t.csv")[0].endswith("| resumed")


def test_code_dirty_ignores_the_results_tables_but_not_the_code(tmp_path):
    import subprocess

    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)
    git("init", "-q")
    (tmp_path / "results").mkdir()
    (tmp_path / "code.py").write_text("x = 1\n")
    (tmp_path / "results" / "t.csv").write_text("a\n1\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "init")
    assert results.code_dirty(tmp_path) is False
    (tmp_path / "results" / "t.csv").write_text("a\n2\n")          # a run merged its rows: still clean code
    assert results.code_dirty(tmp_path) is False
    (tmp_path / "code.py").write_text("x = 2\n")
    assert results.code_dirty(tmp_path) is True
    assert results.code_dirty(tmp_path.parent / "not-a-repo-dir-that-does-not-exist") is None


def test_load_script_gives_the_checkouts_script_and_names_a_missing_one():
    mod = results.load_script("gma_quick_seeds")
    assert Path(mod.__file__).resolve() == (Path(results.RESULTS_DIR).parent / "scripts" / "gma_quick_seeds.py").resolve()
    with pytest.raises(FileNotFoundError, match="no .*nonexistent_script.py"):
        results.load_script("nonexistent_script")


def test_provenance_comments_fold_the_parts_of_one_job_into_one_line(tmp_path):
    """A job that merges after each of its values (or resumes) leaves many parts with one command: one line for
    them, first to last date, with the summed wall time and what the processes reused."""
    import fltutor.results as r
    meta = {"parts": [{"command": "job", "scale": "full", "device": "cpu", "commit": "abc", "date": d, "wall_s": w,
                       **({"reused": {"reloaded_cells": 2}} if d == "2" else {})}
                      for d, w in (("3", 1.5), ("1", 2.0), ("2", 0.5))]
                     + [{"command": "other", "scale": "full", "device": "cpu", "commit": "abc", "date": "4", "wall_s": 1.0}]}
    lines = r.provenance_comments(meta)
    assert lines == ["<!-- job | full | cpu | 1 to 3 (3 parts) | commit abc | 4.0 s in all of these processes "
                     "(2 finished cells reloaded) -->",
                     "<!-- other | full | cpu | 4 | commit abc | 1.0 s -->"]


def test_a_fixed_pair_row_takes_the_label_of_the_command_that_ran_it_not_a_later_grid_selection(tmp_path):
    """The same row and algorithm, first at one fixed pair, then with held-out grid selection (own/shared picks):
    matching on setting and algorithm gave the fixed rows the newer grid command's label."""
    def part(choice, select, note, date):
        rows = [{"dataset": "fashionmnist", "skew": "label", "clients": 500, "algorithm": "fedavg", "aggregation": agg,
                 "lr_choice": choice, "seed": s, "rounds": 200, "metric": "best_global_acc", "value": 80.0 + s}
                for agg in ("AVG", "GMA") for s in (0, 1)]
        meta = results.provenance(command=note, scale=f"{note}: details", settings={
            "settings": [("fashionmnist", "label", 500)], "algorithms": ["fedavg"], "rounds": 200, "select_lr": select})
        meta["date"] = date
        results.write_table(tmp_path, "tables2_3", rows, meta, merge=True)
    part("fixed", False, "one shared pair", "2026-01-01")
    part("own", True, "grid-selected", "2026-01-02")
    rows, meta = results.read_table(tmp_path, "tables2_3")
    by = ["dataset", "skew", "clients", "algorithm", "aggregation", "lr_choice"]
    holds = lambda k: {"settings": [k["dataset"], k["skew"], k["clients"]], "algorithms": k["algorithm"]}  # noqa: E731
    equal = lambda k: {"select_lr": k["lr_choice"] != "fixed"}  # noqa: E731
    got = {k["lr_choice"]: label for k, _, label in results.summarize_by_scale(rows, meta, by, "best_global_acc",
                                                                                holds=holds, equal=equal)}
    assert got == {"fixed": "one shared pair", "own": "grid-selected"}
    loose = {k["lr_choice"]: label for k, _, label in results.summarize_by_scale(rows, meta, by, "best_global_acc",
                                                                                  holds=holds)}
    assert loose == {"fixed": "grid-selected", "own": "grid-selected"}   # the mislabel this guards against
