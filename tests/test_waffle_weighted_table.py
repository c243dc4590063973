"""scripts/waffle_weighted_table.py: the README's notebook-04 tables from tidy rows, checked by hand."""

import pytest


@pytest.fixture(scope="module")
def mod(load_script):
    return load_script("waffle_weighted_table")


def _run(d, m, lr, seed, best, final, diverged):
    ids = {"dataset": "mnist", "distribution": d, "method": m, "lr": lr, "seed": seed}
    return [{**ids, "metric": k, "value": v} for k, v in
            (("best_acc", best), ("final_acc", final), ("diverged_round", diverged))]


def test_table1_means_seeds_counts_divergence_and_shows_the_paper_only_at_its_rate(mod):
    rows = (_run("A*", "waffle_weighted", 0.1, 0, 44.0, None, 35) + _run("A*", "waffle_weighted", 0.1, 1, 50.0, 20.0, None)
            + _run("A*", "waffle_weighted", 0.01, 0, 90.0, 89.0, None) + _run("B", "fedavg", 0.1, 0, 98.0, 97.0, None))
    t = mod.table1(rows)
    assert list(t["distribution"]) == ["B", "A*", "A*"]                      # the paper's order, then rate high to low
    hi = t[(t["distribution"] == "A*") & (t["lr"] == 0.1)].iloc[0]
    assert hi["best (ours)"] == "47.00 ± 4.24"                                 # mean and sample sd of 44 and 50
    assert hi["final"] == "20.00" and hi["diverged"] == "1 of 2, round 35" and hi["seeds"] == 2
    assert hi["paper"] == "97.99 ± 0.26"
    lo = t[(t["distribution"] == "A*") & (t["lr"] == 0.01)].iloc[0]
    assert lo["paper"] == "–" and lo["diverged"] == "–"
    assert hi["rounds to 99 % of best"] == "–"                              # rows without the metric


def test_table1_shows_the_rounds_to_99_percent_of_best(mod):
    rows = [r for s, r99 in ((0, 12.0), (1, 20.0)) for r in
            _run("A", "fedavg", 0.1, s, 99.0, 98.9, None) + [{"dataset": "mnist", "distribution": "A", "method": "fedavg",
                                                              "lr": 0.1, "seed": s, "metric": "rounds_to_99", "value": r99}]]
    assert mod.table1(rows).iloc[0]["rounds to 99 % of best"] == "16.0 ± 5.7"     # mean 16, sd sqrt(32) = 5.66


def test_table1_layout_is_the_papers_grid_of_methods_by_distributions(mod):
    rows = (_run("A*", "waffle_weighted", 0.1, 0, 44.0, None, 35) + _run("A*", "waffle_weighted", 0.1, 1, 50.0, 20.0, None)
            + _run("A*", "waffle_weighted", 0.01, 0, 90.0, 89.0, None) + _run("B", "fedavg", 0.1, 0, 98.0, 97.0, None))
    t = mod.table1_layout(rows).set_index("method")
    assert list(t.columns) == ["A", "B", "C", "A*", "B*"]                      # every distribution, run or not
    assert list(t.index) == ["local", "fedavg", "scaffold", "weight_erosion", "waffle_weighted", "apfl"]
    assert t.loc["waffle_weighted", "A*"] == "47.00 ± 4.24 (2) †1 / 97.99"   # lr 0.01 left out; one seed diverged
    assert t.loc["fedavg", "B"] == "98.00 (1) / 98.97"
    assert t.loc["local", "B*"] == "–"


def test_turns_local_lists_each_seeds_crossing_and_its_share_of_R(mod):
    ids = {"dataset": "mnist", "distribution": "A*", "lr": 0.1, "rounds": 100}
    rows = [{**ids, "method": "weight_erosion", "seed": s, "metric": k, "value": v}
            for s, half, ninety in ((0, 63, 66), (1, 62, 65)) for k, v in
            (("best_acc", 99.0), ("alice_weight_half_round", half), ("alice_weight_90_round", ninety))]
    rows += [{**ids, "method": "fedavg", "seed": 0, "metric": "best_acc", "value": 30.0}]   # no weights: no row
    t = mod.turns_local(rows)
    assert list(t["method"]) == ["weight_erosion"]
    r = t.iloc[0]
    assert (r["weight >= 0.5 from round"], r["weight >= 0.9 from round"], r["0.9 as a share of R"]) == \
        ("63, 62", "66, 65", "65-66 %")


def test_turns_local_clipped_reads_the_first_round_at_each_level_from_the_curves(mod):
    ids = {"dataset": "mnist", "distribution": "C", "images_per_agent": 480, "method": "waffle_weighted", "lr": 0.1,
           "rounds": 4, "grad_clip_norm": 5.0, "c_rule": None}
    weights = {0: [0.1, 0.6, 0.4, 0.95], 1: [0.2, 0.3, 0.5, 0.7]}       # seed 0 dips after 0.5: the first crossing counts
    rows = [{**ids, "seed": s, "round": r + 1, "metric": m, "value": v} for s, w in weights.items()
            for r, x in enumerate(w) for m, v in (("alice_weight", x), ("alice_acc", 50.0))]
    r = mod.turns_local_clipped(rows).iloc[0]
    assert r["c rule"] == "increments" and r["seeds"] == 2               # an empty c rule is the paper's
    assert (r["weight >= 0.5 from round"], r["weight >= 0.9 from round"], r["0.9 as a share of R"]) == \
        ("2, 3", "4, never", "100 %")


def test_stability_keeps_only_the_runs_that_exist(mod):
    base = {"dataset": "mnist", "distribution": "C", "batch_size": 32, "rounds": 30, "seed": 0}
    rows = []
    for m, lr, k, n, best, fin, div in (("scaffold", 0.1, 5, 160, 28.0, None, 18), ("fedavg", 0.1, 50, 1600, 96.5, 96.5, None)):
        ids = {**base, "method": m, "images_per_agent": n, "local_steps": k, "lr": lr, "momentum": 0.0}
        rows += [{**ids, "metric": a, "value": v} for a, v in (("best_acc", best), ("final_acc", fin), ("diverged_round", div))]
    t = mod.stability(rows)
    assert len(t) == 2                                                         # no empty grid of absent combinations
    s = t[t["method"] == "scaffold"].iloc[0]
    assert (s["best"], s["final"], s["diverged at round"]) == ("28.0", "–", "18")


def test_controls_table_by_hand(mod):
    """Rows as scripts/scaffold_control_probe.py writes them (c_rule "" for SCAFFOLD, as read back from the CSV: None)."""
    base = {"dataset": "mnist", "distribution": "C", "images_per_agent": 480, "local_steps": 15, "lr": 0.1, "rounds": 30}
    runs = [("scaffold", "II", None, 0, 88.0, None, 12), ("scaffold", "II", None, 1, 90.0, None, 17),
            ("scaffold", "I", None, 0, 95.0, 90.0, None), ("scaffold", "I", None, 1, 91.0, 80.0, None),
            ("waffle_weighted", "I", "weighted_mean", 0, 60.0, 37.5, None)]
    rows = []
    for m, ctl, rule, seed, best, fin, div in runs:
        ids = {**base, "method": m, "control": ctl, "c_rule": rule, "seed": seed}
        rows += [{**ids, "metric": k, "value": v} for k, v in
                 (("best_acc", best), ("final_acc", fin), ("diverged_round", div))]
    t = mod.controls(rows)
    assert list(zip(t["method"], t["option"], t["c rule"])) == [("scaffold", "II", "–"), ("scaffold", "I", "–"),
                                                                ("waffle_weighted", "I", "weighted_mean")]
    two, one, w = (t.iloc[i] for i in range(3))
    assert (two["best"], two["final"], two["diverged"]) == ("89.00 ± 1.41", "–", "2 of 2 (rounds 12, 17)")
    assert (one["best"], one["final"], one["diverged"]) == ("93.00 ± 2.83", "85.00 ± 7.07", "0 of 2")
    assert (w["best"], w["final"], w["seeds"]) == ("60.00", "37.50", 1)
    assert two["setting"] == "C, 480 images (K = 15), lr 0.1, 30 rounds"
    assert w["weight of the agent that diverged"] == "–"            # a table without the column still prints


def test_controls_table_lists_the_weight_of_each_diverged_agent(mod):
    base = {"dataset": "mnist", "distribution": "C", "images_per_agent": 480, "local_steps": 15, "lr": 0.1, "rounds": 30,
            "method": "waffle_weighted", "control": "II", "c_rule": "increments"}
    rows = []
    for seed, (div, w) in enumerate([(15, 0.0), (10, 0.03521)]):
        rows += [{**base, "seed": seed, "metric": k, "value": v} for k, v in
                 (("best_acc", 90.0), ("final_acc", None), ("diverged_round", div), ("diverged_agent_weight", w))]
    row = mod.controls(rows).iloc[0]
    assert row["diverged"] == "2 of 2 (rounds 10, 15)" and row["weight of the agent that diverged"] == "0.04, 0.00"   # in round order


def test_table1_leaves_out_rows_at_a_reduced_scale(mod):
    full = [{**r, "images_per_agent": "all"} for r in _run("B", "local", 0.1, 0, 99.5, 99.4, None)]
    small = [{**r, "images_per_agent": 600} for r in _run("B", "local", 0.1, 1, 90.0, 89.0, None)]
    t = mod.table1(full + small)
    assert len(t) == 1 and t.iloc[0]["seeds"] == 1 and t.iloc[0]["best (ours)"] == "99.50"


def test_controls_table_puts_clipped_runs_on_their_own_rows(mod):
    base = {"dataset": "mnist", "distribution": "C", "images_per_agent": 480, "local_steps": 15, "lr": 0.1, "rounds": 30,
            "method": "scaffold", "control": "II", "c_rule": None}
    rows = [{**base, "seed": 0, "metric": "best_acc", "value": 88.0}, {**base, "seed": 0, "metric": "diverged_round", "value": 12}]
    rows += [{**base, "grad_clip_norm": 1.0, "seed": s, "metric": k, "value": v}
             for s in (0, 1) for k, v in (("best_acc", 95.0 + s), ("final_acc", 94.0), ("diverged_round", None))]
    t = mod.controls(rows)                     # the first run has no grad_clip_norm column: unclipped
    assert list(t["gradient clip"]) == ["–", "1"]
    assert list(t["diverged"]) == ["1 of 1 (rounds 12)", "0 of 2"] and t.iloc[1]["best"] == "95.50 ± 0.71"


def test_fig5_pivots_sizes_into_columns_with_the_penalty_first(mod):
    """Fig. 5 / Table 4: one row per (images per agent, label distribution), "with p_d / without" per size."""
    def run(imgs, label, size, p_d, seed, best, final):
        ids = {"dataset": "mnist", "label": label, "size": size, "p_d": p_d, "rounds": 100, "images_per_agent": imgs,
               "seed": seed}
        return [{**ids, "metric": "best_acc", "value": best}, {**ids, "metric": "final_acc", "value": final}]
    rows = (run("all", "B", "A", 0.0067, 0, 99.0, 98.0) + run("all", "B", "A", 0.0067, 1, 98.0, 97.0)
            + run("all", "B", "A", 0.0, 0, 97.0, 96.0) + run("all", "B", "A", 0.0, 1, 97.0, 96.0)
            + run("600", "A", "C", 0.006, 0, 98.0, 97.8))
    t = mod.fig5(rows)
    assert list(t["images per agent"]) == ["600", "all"]
    full = t[t["images per agent"] == "all"].iloc[0]
    assert full["label distribution"] == "C (= Table 1's B)" and full["p_d"] == "0.0067 / 0" and full["seeds"] == 2
    # by hand: best 99 and 98 -> 98.5 ± 0.7 (final 97.5 ± 0.7); without the penalty 97 and 97 -> 97.0 ± 0.0
    assert full["size A (equal)"] == "98.5 ± 0.7 (97.5 ± 0.7) / 97.0 ± 0.0 (96.0 ± 0.0)"
    assert full["size B (6-21 %)"] == "– / –"                                     # not run: said, not blank
    sketch = t[t["images per agent"] == "600"].iloc[0]
    assert sketch["label distribution"] == "A (IID)" and sketch["size C (agent 4 twice)"] == "98.0 (97.8)"
