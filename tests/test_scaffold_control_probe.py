"""scripts/scaffold_control_probe.py: its rows and summary against hand-made runs, and one tiny call end to end."""
import pytest


@pytest.fixture
def probe(load_script):
    return load_script("scaffold_control_probe")


def _res(alice, diverged=None, weights=None):
    """A run's results with Alice's (agent 0's) accuracy per evaluated round (and WAFFLE's weights)."""
    return {"history": [{"round": r, "local_acc_per_client": [a, 50.0], **({"weights": weights[r]} if weights else {})}
                        for r, a in enumerate(alice)], "diverged": diverged}


def test_rows_of_a_finished_and_a_diverged_run(probe):
    p = probe
    ok = {r["metric"]: r["value"] for r in p.run_rows({"seed": 0}, _res([40.0, 90.0, 85.5]))}
    assert ok == {"best_acc": 90.0, "final_acc": 85.5, "diverged_round": None, "diverged_agent": None,
                  "diverged_agent_weight": None, "agents_set_aside": 0, "first_set_aside_round": None}
    bad = {r["metric"]: r["value"] for r in p.run_rows({"seed": 1}, _res([40.0, 70.0], {"round": 3, "client": 1},
                                                                           [[0.5, 0.5], [0.9, 0.1]]))}
    assert bad == {"best_acc": 70.0, "final_acc": None, "diverged_round": 3, "diverged_agent": 1,
                   "diverged_agent_weight": 0.1,           # agent 1's weight in the last finished round
                   "agents_set_aside": 0, "first_set_aside_round": None}
    none = {r["metric"]: r["value"] for r in p.run_rows({"seed": 2}, _res([], {"round": 1, "client": 0}))}
    assert none == {"best_acc": None, "final_acc": None, "diverged_round": 1, "diverged_agent": 0,
                    "diverged_agent_weight": None, "agents_set_aside": 0, "first_set_aside_round": None}


def test_rows_count_the_agents_set_aside(probe):
    res = _res([50.0, 60.0, 70.0])
    res["history"][1]["set_aside"] = [7]
    res["history"][2]["set_aside"] = [7, 3]
    got = {r["metric"]: r["value"] for r in probe.run_rows({"seed": 0}, res)}
    assert (got["agents_set_aside"], got["first_set_aside_round"], got["final_acc"]) == (2, 1, 70.0)


def test_summary_by_hand(probe):
    p = probe
    rows = []
    for seed, (curve, stop) in enumerate([([80.0, 90.0], None), ([70.0, 60.0], {"round": 9}), ([95.0, 94.0], None)]):
        rows += p.run_rows({"method": "scaffold", "control": "II", "c_rule": "", "nonfinite": "", "seed": seed}, _res(curve, stop))
    (line,) = p.summary(rows)
    # best 90, 70, 95: mean 85, sample sd sqrt(((5)^2 + (15)^2 + (10)^2) / 2) = sqrt(175) = 13.23; finals 90 and 94
    assert "best  85.00 ± 13.23 (3 seeds)" in line
    assert "final  92.00" in line
    assert "diverged 1 of 3 (rounds 9)" in line


def test_a_tiny_call_runs_both_options_and_writes_nothing(probe, tmp_path, capsys):
    probe.main(["--images", "16", "--test-images", "20", "--rounds", "2", "--seeds", "0",
                   "--methods", "scaffold", "--out-root", str(tmp_path), "--no-write"])
    out = capsys.readouterr().out
    assert "scaffold         option II" in out and "scaffold         option I  " in out
    assert not (tmp_path / "results").exists()


def test_bad_input_is_named_before_training(probe, tmp_path):
    with pytest.raises(SystemExit):
        probe.main(["--rounds", "0", "--out-root", str(tmp_path), "--no-write"])


def test_summary_splits_by_clip_norm_and_reads_old_rows_as_unclipped(probe):
    rows = probe.run_rows({"method": "scaffold", "control": "II", "c_rule": "", "nonfinite": "", "seed": 0},
                          _res([80.0], {"round": 5}))                       # an old row: no grad_clip_norm column
    rows += probe.run_rows({"method": "scaffold", "control": "II", "c_rule": "", "nonfinite": "", "seed": 1,
                            "grad_clip_norm": 0.0}, _res([70.0], {"round": 7}))
    rows += probe.run_rows({"method": "scaffold", "control": "II", "c_rule": "", "nonfinite": "", "seed": 0,
                            "grad_clip_norm": 1.0}, _res([90.0, 95.0]))
    off, on = probe.summary(rows)
    assert "clip" not in off and "(2 seeds)" in off and "diverged 2 of 2 (rounds 5, 7)" in off
    assert "clip 1" in on and "best  95.00 (1 seeds)" in on and "diverged 0 of 1" in on


def test_summary_keeps_distributions_and_scales_apart(probe):
    # one table holds C at 480 images and A* at full scale: a seed of each is never pooled into one cell
    ids = {"method": "waffle_weighted", "control": "II", "c_rule": "increments", "nonfinite": "", "seed": 2}
    rows = probe.run_rows({**ids, "distribution": "C", "images_per_agent": 480, "rounds": 30}, _res([96.5]))
    rows += probe.run_rows({**ids, "distribution": "A*", "images_per_agent": 5999, "rounds": 100}, _res([54.2]))
    c, a_star = probe.summary(rows)
    assert a_star.startswith("A* 5999 images 100 rounds: ") and "best  54.20 (1 seeds)" in a_star
    assert c.startswith("C 480 images 30 rounds: ") and "best  96.50 (1 seeds)" in c
    assert probe.summary(rows[:len(rows) // 2])[0].startswith("waffle_weighted")   # one setting: no prefix


def test_a_tiny_clipped_sweep_runs(probe, tmp_path, capsys):
    probe.main(["--images", "16", "--test-images", "20", "--rounds", "2", "--seeds", "0", "1", "--controls", "II",
                "--methods", "scaffold", "--clip-norms", "0", "1", "--out-root", str(tmp_path), "--no-write"])
    out = capsys.readouterr().out
    assert "scaffold option II: 4 runs" in out
    assert "clip 1" in out and out.count("(2 seeds)") == 2


def test_curve_rows_follow_alice_round_by_round(probe):
    res = _res([40.0, 90.0], weights=[[0.5, 0.5], [0.9, 0.1]])
    res["history"] = [{**h, "round": h["round"] + 1} for h in res["history"]]        # history rounds count from 1
    got = [(r["round"], r["metric"], r["value"]) for r in probe.curve_rows({"seed": 0}, res)]
    assert got == [(1, "alice_acc", 40.0), (1, "alice_weight", 0.5), (2, "alice_acc", 90.0), (2, "alice_weight", 0.9)]
    assert all(r["seed"] == 0 for r in probe.curve_rows({"seed": 0}, res))


def test_summary_splits_by_model_and_reads_rows_without_one_as_lenet5(probe):
    ids = {"method": "scaffold", "control": "II", "c_rule": "", "nonfinite": "", "seed": 0}
    rows = probe.run_rows(ids, _res([80.0], {"round": 5}))                                   # no model column
    rows += probe.run_rows({**ids, "model": "lenet5_classic"}, _res([90.0, 97.0]))
    plain, classic = sorted(probe.summary(rows), key=lambda line: "lenet5_classic" in line)
    assert "lenet5" not in plain and "diverged 1 of 1" in plain
    assert "lenet5_classic" in classic and "best  97.00 (1 seeds)" in classic and "diverged 0 of 1" in classic


def test_a_tiny_call_with_the_classic_lenet_tags_its_rows(probe, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(probe.results, "RESULTS_DIR", tmp_path / "results")
    probe.main(["--images", "16", "--test-images", "20", "--rounds", "2", "--seeds", "0", "--controls", "II",
                "--methods", "scaffold", "--model", "lenet5_classic", "--out-root", str(tmp_path / "runs")])
    rows, _ = probe.results.read_table(tmp_path / "results" / "waffle_weighted", "scaffold_control")
    assert {r["model"] for r in rows} == {"lenet5_classic"}
    assert "lenet5_classic" in capsys.readouterr().out


def test_a_probe_row_holds_what_the_same_cell_trained_alone_gives(probe, tmp_path, monkeypatch):
    """The probe's best and final accuracy for Alice, against one Federation built here from the settings its
    docstring names (LeNet-5, batch 32, one local epoch, every agent every round, option I, target 0, ΔΩ = 3.2)."""
    import numpy as np
    from fltutor.federation import Federation
    from fltutor.scenarios import waffle_weighted_data
    monkeypatch.setattr(probe.results, "RESULTS_DIR", tmp_path / "results")
    probe.main(["--images", "64", "--test-images", "20", "--rounds", "3", "--seeds", "1", "--controls", "I",
                "--methods", "waffle_weighted", "--lr", "0.05", "--out-root", str(tmp_path / "runs")])
    rows, _ = probe.results.read_table(tmp_path / "results" / "waffle_weighted", "scaffold_control")
    got = {r["metric"]: r["value"] for r in rows}
    curve, _ = probe.results.read_table(tmp_path / "results" / "waffle_weighted", "scaffold_control_curves")
    fd = waffle_weighted_data("mnist", "C", seed=1, max_train_per_agent=64)   # 2 steps: options I and II differ
    rng = np.random.default_rng([1, 8])
    fd = fd.with_parts(fd.train, [np.sort(rng.choice(t, size=min(len(t), 20), replace=False)) for t in fd.test])
    fed = Federation("lenet5", fd, "waffle_weighted", rounds=3, local_epochs=1, batch_size=32, lr=0.05,
                     client_fraction=1.0, control="I", target=0, delta_omega=3.2, seed=1, progress=False)
    (hist,) = fed.run()
    alice = [h["local_acc_per_client"][0] for h in hist if "local_acc_per_client" in h]
    weights = [h["weights"][0] for h in hist]
    assert len(alice) == 3 and not fed.diverged[0]
    assert [r["value"] for r in curve if r["metric"] == "alice_acc"] == pytest.approx([round(a, 3) for a in alice])
    assert [r["value"] for r in curve if r["metric"] == "alice_weight"] == pytest.approx([round(w, 5) for w in weights])
    assert got["best_acc"] == pytest.approx(round(max(alice), 4))
    assert got["final_acc"] == pytest.approx(round(alice[-1], 4))
    assert got["diverged_round"] is None and {r["control"] for r in rows} == {"I"}
