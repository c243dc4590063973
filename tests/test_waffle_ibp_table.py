"""scripts/waffle_ibp_table.py: the open-choice map read from tidy rows, checked by hand."""

import pytest


@pytest.fixture(scope="module")
def mod(load_script):
    return load_script("waffle_ibp_table")


def _cell(opt, kw, lr, seed, minority, diverged=None):
    ids = {"dataset": "mnist", "mode": "multimodal", "method": "waffle_ibp", "seed": seed,
           "selection_optimizer": opt, "kl_weight": kw, "selection_lr": lr}
    rows = [{**ids, "metric": "minority", "value": minority}, {**ids, "metric": "local_acc", "value": 90.0}]
    return rows + ([{**ids, "metric": "diverged_round", "value": diverged}] if diverged else [])


def test_open_choices_grid_sorts_axes_and_summarizes_each_cell_over_seeds(mod):
    rows = (_cell("adam", 0.1, 0.1, 0, 90.0) + _cell("adam", 0.1, 0.1, 1, 96.0) + _cell("adam", 0.0, 0.1, 0, 97.0)
            + _cell("adam", 1.0, 0.01, 0, None, diverged=40) + _cell("sgd", 1.0, 0.04, 0, 60.0))
    g = mod.open_choices_grid(rows)
    assert set(g) == {"adam", "sgd"}
    assert g["adam"]["kl_weight"] == [0.0, 0.1, 1.0] and g["adam"]["selection_lr"] == [0.01, 0.1]
    c = g["adam"]["cells"][0.1, 0.1]
    assert c["mean"] == pytest.approx(93.0) and c["sd"] == pytest.approx(18 ** 0.5) and c["n"] == 2   # 90, 96
    assert g["adam"]["cells"][1.0, 0.01]["missing"] == 1 and g["adam"]["cells"][1.0, 0.01]["mean"] is None
    assert (0.0, 0.01) not in g["adam"]["cells"]                                    # a cell never run stays empty
    # the paper's 93.87 lies within 93.00 ± 4.24, not within one seed's 97.00 (no spread) nor a diverged cell
    assert mod.within_paper(c, 93.87) and not mod.within_paper(g["adam"]["cells"][0.0, 0.1], 97.0)
    assert not mod.within_paper(g["adam"]["cells"][1.0, 0.01], 93.87)


def test_print_open_choices_bolds_the_cells_that_hold_the_papers_minority(mod, capsys):
    rows = _cell("adam", 0.1, 0.1, 0, 90.0) + _cell("adam", 0.1, 0.1, 1, 96.0) + _cell("adam", 1.0, 0.1, 0, None, 12)
    mod.print_open_choices(rows, {"command": "x"})
    out = capsys.readouterr().out
    assert "| 0.1 | **93.00 ± 4.24 (2)** |" in out           # paper's MNIST minority 93.87 is within the spread
    assert "| 1 | diverged in 1 of 1 |" in out
    assert "Selections stepped by Adam" in out and "rate 0.1" in out


def _abl(table, mode, method, seed, value, opt="adam", lr=0.04, **setting):
    cols = {"l1_weight": "", "alpha_ratio": "", "num_factors": "", "local_epochs": "", "lr": lr, **setting}
    return {"table": table, "dataset": "mnist", "mode": mode, "method": method, "selection_optimizer": opt,
            "seed": seed, **cols, "metric": "local_acc", "value": value}


def test_ablations_are_keyed_by_their_own_setting_and_set_beside_the_paper(mod, capsys):
    rows = [_abl("Table 9", "multimodal", "waffle_ibp", s, v, alpha_ratio=0.4, num_factors=80) for s, v in ((0, 97.0), (1, 95.0))]
    rows += [_abl("Table 9", "unimodal", "waffle_ibp", 0, 94.0, alpha_ratio=1.0, num_factors=150)]
    rows += [_abl("Table 8", "unimodal", "waffle_ibp_l1", 0, 98.0, l1_weight=w) for w in (10.0, 2.0, 0.1)]
    rows += [_abl("Tables 6-7", "unimodal", "fedavg", 0, 93.0, opt="", local_epochs=20)]
    rows += [_abl("Tables 6-7", "multimodal", "waffle_ibp", 0, None, lr=0.02, local_epochs=30)]       # a diverged run
    rows += [_abl("Tables 6-7", "multimodal", "fedavg", 0, 88.0, opt="", local_epochs=10)]   # not Table 7's rate 0.02
    cells = mod.ablation_cells(rows)
    t9 = cells["Table 9", "mnist", "multimodal", "waffle_ibp", "adam", (0.4, 80)]
    assert t9["mean"] == pytest.approx(96.0) and t9["sd"] == pytest.approx(2 ** 0.5)
    mod.print_ablations(rows, {"command": "x"})
    out = capsys.readouterr().out
    # Table 9 at alpha/F 0.4, F 80: paper 91.83, beyond 96.00 - 1.41 -> yes
    assert "| Table 9 | mnist | multimodal | waffle_ibp | adam | alpha/F 0.4, F 80 | 96.00 ± 1.41 (2) | 91.83 | yes |" in out
    # unimodal alpha/F: IEEE Access prints none; the ICLR submission's Table 6 has 96.45 at alpha/F 1, F 150
    assert "| Table 9 | mnist | unimodal | waffle_ibp | adam | alpha/F 1, F 150 | 94.00 (1) | 96.45 | n/a (1 seed) |" in out
    # Table 6, FedAvg at E = 20: the paper's 93.36; one seed has no spread to judge by
    assert "| E = 20, lr 0.04 | 93.00 (1) | 93.36 | n/a (1 seed) |" in out
    assert "| E = 30, lr 0.02 | diverged in 1 of 1 (1) | 95.07 | — |" in out
    assert "| E = 10, lr 0.04 | 88.00 (1) | — | — |" in out                        # the paper's 88.70 is at lr 0.02
    l1 = [line for line in out.splitlines() if "L1 weight" in line]                 # numeric order, not text order
    assert [line.split("| L1 weight ")[1].split(" |")[0] for line in l1] == ["0.1", "2", "10"]
    assert "| 0.1 | 98.00 (1) | 94.59 |" in l1[0].replace("L1 weight ", "")


def test_the_alpha_f_grid_sets_each_mode_beside_its_own_paper_table(mod, capsys):
    rows = [_abl("Table 9", mode, "waffle_ibp", s, v, alpha_ratio=a, num_factors=f)
            for mode, a, f, vals in (("unimodal", 0.4, 80, (97.0, 96.0)), ("multimodal", 0.4, 80, (95.0, 93.0)),
                                     ("multimodal", 1.0, 150, (96.0, 96.0)))
            for s, v in enumerate(vals)]
    g = mod.alpha_f_grid(rows)
    assert list(g) == ["multimodal", "unimodal"]                           # the paper's own table first
    assert g["multimodal"]["ratios"] == [0.4, 1.0] and g["multimodal"]["factors"] == [80, 150]
    assert g["multimodal"]["cells"][0.4, 80]["mean"] == pytest.approx(94.0)
    assert g["multimodal"]["paper"][0.4, 80] == 91.83 and g["unimodal"]["paper"][0.4, 80] == 93.20
    mod.print_alpha_f(rows)
    out = capsys.readouterr().out
    assert "| 0.4 | 94.00 ± 1.41 / 91.83 | — / 93.23 |" in out                 # no run at F = 150: a dash
    assert "| 1 | — / 94.70 | 96.00 ± 0.00 / 95.93 |" in out
    assert "ICLR submission's Table 6" in out and "| 0.4 | 96.50 ± 0.71 / 93.20 |" in out


def test_factors_switched_on_sit_beside_the_priors_expectation_and_the_groups_accuracies(mod, capsys):
    def rows_of(mode, a, f, seed, active, local, minority=None):
        r = _abl("Table 9", mode, "waffle_ibp", seed, local, alpha_ratio=str(a), num_factors=str(f))   # CSV reads text
        out = [r, {**r, "metric": "active_factors_fc1", "value": active}]
        return out + ([{**r, "metric": "minority", "value": minority}] if minority is not None else [])
    rows = (rows_of("unimodal", 1.0, 3, 0, 2.0, 97.0) + rows_of("multimodal", 0.5, 2, 0, 1.0, 96.0, 90.0)
            + rows_of("multimodal", 0.5, 2, 1, 2.0, 94.0, 80.0) + rows_of("multimodal", 1.0, 2, 0, 2.0, 93.0, 70.0)
            + rows_of("multimodal", 1.0, 2, 1, 2.0, 93.0, 75.0)
            + [_abl("Table 9", "multimodal", "waffle_ibp", 0, 95.0, alpha_ratio=0.4, num_factors=80)])   # logged none
    g = mod.alpha_f_factors(rows)
    assert list(g) == ["multimodal", "unimodal"] and list(g["multimodal"]) == [(0.5, 2), (1.0, 2)]
    # by hand: alpha = 0.5 * 2 = 1 gives 1/2 + 1/4; alpha = 1 * 3 = 3 gives 3/4 + 9/16 + 27/64
    assert g["multimodal"][0.5, 2]["prior"] == pytest.approx(0.75)
    assert g["unimodal"][1.0, 3]["prior"] == pytest.approx(1.734375)
    c = g["multimodal"][0.5, 2]
    assert c["active"]["mean"] == pytest.approx(1.5) and c["minority"]["mean"] == pytest.approx(85.0)
    assert c["majority"] is None and g["unimodal"][1.0, 3]["minority"] is None
    mod.print_alpha_f_factors(rows)
    out = capsys.readouterr().out
    assert "| multimodal | 0.5 | 2 | 1.50 ± 0.71 | 0.8 | 0.75 | 95.00 ± 1.41 | 85.00 ± 7.07 | — |" in out
    assert "| unimodal | 1 | 3 | 2.00 | 1.7 | 0.67 | 97.00 | — | — |" in out
    # seed by seed, alpha/F 0.5 minus 1 at F = 2: minority 90 - 70 and 80 - 75, local 96 - 93 and 94 - 93
    lo, hi, d = mod.alpha_f_paired(rows)["multimodal", 2]
    assert (lo, hi) == (0.5, 1.0) and d["majority"] is None
    assert d["minority"]["mean"] == pytest.approx(12.5) and d["minority"]["sd"] == pytest.approx(7.5 * 2 ** 0.5)
    assert "| multimodal | 2 | 0.5 − 1 | +2.00 ± 1.41 | +12.50 ± 10.61 | — |" in out
    assert ("unimodal", 3) not in mod.alpha_f_paired(rows)             # one alpha/F: nothing to pair


def test_tables_6_7_leads_are_paired_by_seed_and_set_beside_the_papers_lead(mod, capsys):
    def run(mode, m, seed, local, lr, minority=None, global_=None):
        r = _abl("Tables 6-7", mode, m, seed, local, lr=str(lr), local_epochs="10")   # the CSV reads text
        return [r] + ([{**r, "metric": "minority", "value": minority}] if minority is not None else []) + \
            ([{**r, "metric": "global_acc", "value": global_}] if global_ is not None else [])
    rows = (run("unimodal", "fedavg", 0, 92.0, 0.04, global_=93.0) + run("unimodal", "waffle_ibp", 0, 93.0, 0.04, global_=92.0)
            + run("unimodal", "fedavg", 1, 90.0, 0.04, global_=90.0) + run("unimodal", "waffle_ibp", 1, 94.0, 0.04, global_=92.0)
            + run("unimodal", "waffle_ibp", 2, 99.0, 0.04)                        # no FedAvg at seed 2: not paired
            + run("multimodal", "fedavg", 0, 90.0, 0.02, 70.0) + run("multimodal", "waffle_ibp", 0, 95.0, 0.02, 90.0)
            + run("multimodal", "fedavg", 0, 90.0, 0.04, 70.0) + run("multimodal", "waffle_ibp", 0, 91.0, 0.04, 75.0))
    g = mod.epochs_leads(rows)
    u = g["mnist", "unimodal", 0.04, 10]
    # leads 1 and 4: mean 2.5, sd 2.12; seed 2 counted as missing; the paper: 95.10 - 92.95
    assert u["local_acc"]["mean"] == pytest.approx(2.5) and u["local_acc"]["missing"] == 1 and u["paper"] == 2.15
    assert u["minority"] is None
    # local - global per seed: WAFFLe 93 - 92 and 94 - 92 (seed 2 has no global row), FedAvg 92 - 93 and 90 - 90
    assert u["lift_waffle_ibp"]["mean"] == pytest.approx(1.5) and u["lift_fedavg"]["mean"] == pytest.approx(-0.5)
    assert u["lift_waffle_ibp"]["n"] == 2 and "lift_fedavg" not in g["mnist", "multimodal", 0.02, 10]
    assert g["mnist", "multimodal", 0.02, 10]["paper"] == pytest.approx(95.37 - 88.70)   # Table 7 ran at 0.02
    assert g["mnist", "multimodal", 0.04, 10]["paper"] is None
    mod.print_epochs_leads(rows)
    out = capsys.readouterr().out
    assert "| mnist | unimodal | 0.04 | 0.1 | 10 | 2 | +2.50 ± 2.12 (1 seed(s) lost) | +2.15 | — | +1.50 ± 0.71" in out
    assert "| mnist | multimodal | 0.02 | 0.1 | 10 | 1 | +5.00 | +6.67 | +20.00 | — | — |" in out


def test_leads_over_fedavg_are_taken_seed_by_seed_from_table_1s_fedavg_rows(mod, capsys):
    t12 = [{"dataset": "mnist", "mode": "multimodal", "method": "fedavg", "variant": "", "minority_classes": "0-2-4-6-8",
            "seed": s, "metric": "minority", "value": v} for s, v in ((0, 70.0), (1, 50.0), (2, 60.0))]
    t12 += [{**t12[0], "minority_classes": "1-3", "value": 1.0},                 # another reading of the minority
            {**t12[0], "method": "waffle_ibp", "value": 2.0}, {**t12[0], "metric": "majority", "value": 3.0}]
    fa = mod.fedavg_minority(t12, "mnist")
    assert fa == {0: 70.0, 1: 50.0, 2: 60.0}
    rows = _cell("adam", 0.1, 0.1, 0, 95.0) + _cell("adam", 0.1, 0.1, 1, 85.0) + _cell("adam", 0.1, 0.1, 3, 99.0)
    leads = mod.lead_rows(rows, fa)
    assert sorted((r["seed"], r["value"]) for r in leads) == [(0, 25.0), (1, 35.0)]   # seed 3 has no FedAvg run
    mod.print_open_choices(rows, {"command": "x"}, fedavg=fa)
    out = capsys.readouterr().out
    # leads 25 and 35: mean +30.00, sd 7.07; the paper's 93.87 - 67.40 = +26.47 lies within it
    assert "| 0.1 | **+30.00 ± 7.07 (2)** |" in out and "+26.47" in out


def test_tables_1_2_leave_out_rows_at_another_number_of_rounds(mod, tmp_path, capsys, monkeypatch):
    from fltutor import results
    row = {"dataset": "mnist", "mode": "unimodal", "method": "fedavg", "variant": "", "minority_classes": "",
           "clients": 120, "lr": 0.04, "metric": "local_acc"}
    rows = [{**row, "rounds": 100, "seed": 0, "value": 94.0}, {**row, "rounds": 100, "seed": 1, "value": 96.0},
            {**row, "rounds": 50, "seed": 0, "value": 10.0}]                    # a T = 50 run must not pool in
    results.write_table(tmp_path, "tables1_2", rows, {"command": "x"})
    monkeypatch.setattr("sys.argv", ["waffle_ibp_table.py", "--folder", str(tmp_path)])
    mod.main()
    out = capsys.readouterr().out
    assert "left out: rows with T = [50]" in out
    assert "| mnist | fedavg | 2/0 | 95.00 ± 1.41 |" in out


def _probe(mode, e, seed, group, **metrics):
    ids = {"dataset": "mnist", "mode": mode, "method": "waffle_ibp", "rounds": 50, "local_epochs": e, "lr": 0.04,
           "seed": seed, "group": group}
    return [{**ids, "metric": m, "value": v} for m, v in metrics.items()]


def test_epochs_probe_pairs_scores_seed_by_seed_and_sorts_e_as_a_number(mod):
    rows = (_probe("unimodal", 5, 0, "all", own=94.0, prior_mean=91.0, swap_disjoint=90.0, own_same=94.5, swap_same=94.0,
                   jaccard_same_fc1=0.8, jaccard_none_fc1=0.7, active_fc1=80.0)
            + _probe("unimodal", 5, 1, "all", own=95.0, prior_mean=93.0, swap_disjoint=89.0, own_same=95.0, swap_same=95.5,
                     jaccard_same_fc1=0.9, jaccard_none_fc1=0.7, active_fc1=82.0)
            + _probe("unimodal", 20, 0, "all", own=92.0, prior_mean=91.5, swap_disjoint=91.0, own_same=92.0, swap_same=92.0,
                     jaccard_same_fc1=0.95, jaccard_none_fc1=0.92, active_fc1=72.0))
    got = mod.epochs_probe(rows)
    assert [k[4] for k in got] == [5, 20]                         # 5 before 20, not as strings
    c = got["mnist", "unimodal", 0.04, 0.1, 5, "all"]
    assert c["own − prior mean"]["mean"] == pytest.approx(2.5) and c["own − prior mean"]["sd"] == pytest.approx(0.5 ** 0.5)
    assert c["own − disjoint's"]["mean"] == pytest.approx(5.0)   # (4 + 6) / 2
    assert c["own − same classes'"]["mean"] == pytest.approx(0.0)   # +0.5 and -0.5
    assert c["jaccard same − none"]["mean"] == pytest.approx(0.15) and c["active"]["mean"] == pytest.approx(81.0)
    assert got["mnist", "unimodal", 0.04, 0.1, 20, "all"]["own − prior mean"]["n"] == 1


def test_versus_fedavg_pairs_the_probe_with_table_6s_fedavg_by_seed(mod):
    probe = (_probe("unimodal", 20, 0, "all", prior_mean=91.0) + _probe("unimodal", 20, 1, "all", prior_mean=92.0)
             + _probe("unimodal", 20, 2, "all", prior_mean=90.0) + _probe("multimodal", 20, 0, "minority", prior_mean=50.0))
    abl = [{"table": "Tables 6-7", "dataset": "mnist", "mode": "unimodal", "method": m, "local_epochs": 20, "lr": 0.04,
            "seed": s, "metric": "local_acc", "value": v}
           for m, s, v in (("fedavg", 0, 92.0), ("fedavg", 1, 92.5), ("waffle_ibp", 0, 99.0), ("fedavg", 3, 90.0))]
    probe += [{**r, "kl_weight": 0.0, "value": r["value"] + 1} for r in _probe("unimodal", 20, 0, "all", prior_mean=91.0)]
    got = mod.versus_fedavg(probe, abl)
    kl0 = got["mnist", "unimodal", 0.04, 0.0, 20]   # KL 0 probed seed 0 only: FedAvg's seeds 1 and 3 are not missing
    assert kl0["mean"] == pytest.approx(0.0) and kl0["n"] == 1 and kl0["missing"] == 0
    st = got["mnist", "unimodal", 0.04, 0.1, 20]
    # seeds 0 and 1 have both: -1.0 and -0.5; seed 2 has no FedAvg (missing); FedAvg's seed 3 was not probed
    assert st["mean"] == pytest.approx(-0.75) and st["n"] == 2 and st["missing"] == 1
    own = mod.versus_fedavg(_probe("unimodal", 20, 1, "all", own=93.5), abl, "own")
    assert own == {("mnist", "unimodal", 0.04, 0.1, 20): {"mean": pytest.approx(1.0), "sd": None, "n": 1, "missing": 0,
                                                   "min": 1.0, "max": 1.0}}
    assert list(got) == [("mnist", "unimodal", 0.04, 0.0, 20), ("mnist", "unimodal", 0.04, 0.1, 20)]   # no minority row


def test_ablation_rows_at_another_kl_weight_are_kept_apart_and_paired_with_fedavg_of_their_seeds(mod):
    def run(m, seed, local, variant):
        return [{"table": "Tables 6-7", "dataset": "mnist", "mode": "unimodal", "method": m, "variant": variant,
                 "selection_optimizer": "adam" if m != "fedavg" else "", "l1_weight": None, "alpha_ratio": None,
                 "num_factors": None, "lr": "0.04", "local_epochs": "20", "seed": seed, "metric": "local_acc", "value": local}]
    v01, v0 = "adam 0.1, KL 0.1, alpha/F 0.8, T 0.667", "adam 0.1, KL 0, alpha/F 0.8, T 0.667"
    rows = (run("fedavg", 0, 92.0, "") + run("fedavg", 1, 93.0, "") + run("fedavg", 2, 91.0, "")
            + run("waffle_ibp", 0, 91.0, v01) + run("waffle_ibp", 1, 92.0, v01) + run("waffle_ibp", 2, 90.5, v01)
            + run("waffle_ibp", 0, 97.0, v0) + run("waffle_ibp", 1, 96.0, v0))
    cells = mod.ablation_cells(rows)                      # no "seed 0 appears twice": KL 0 is a cell of its own
    assert cells["Tables 6-7", "mnist", "unimodal", "waffle_ibp", "adam", (20, 0.04)]["mean"] == pytest.approx(273.5 / 3)
    assert cells["Tables 6-7", "mnist", "unimodal", "waffle_ibp", "adam", (20, 0.04, 0.0)]["mean"] == pytest.approx(96.5)
    assert mod.setting_label("Tables 6-7", (20, 0.04, 0.0)) == "E = 20, lr 0.04, KL 0"
    assert mod.ablation_paper("Tables 6-7", "mnist", "unimodal", "waffle_ibp", (20, 0.04, 0.0)) == 96.32
    assert mod.epochs_kls(rows) == [0.1, 0.0]
    d01 = mod.epochs_leads(rows)["mnist", "unimodal", 0.04, 20]["local_acc"]
    assert d01["mean"] == pytest.approx(-0.833333, abs=1e-5) and d01["n"] == 3       # -1, -1, -0.5
    d0 = mod.epochs_leads(rows, 0.0)["mnist", "unimodal", 0.04, 20]["local_acc"]
    assert d0["mean"] == pytest.approx(4.0) and d0["n"] == 2 and d0["missing"] == 0   # FedAvg's seed 2 not counted


def _t12(ds, mode, method, seed, lr=0.04, variant="", classes="", **metrics):
    ids = {"dataset": ds, "mode": mode, "method": method, "variant": variant, "minority_classes": classes, "lr": lr,
           "seed": seed}
    return [{**ids, "metric": m, "value": v} for m, v in metrics.items()]


def test_table_1_2_leads_pair_each_variant_with_fedavg_at_the_same_seed_and_rate(mod, capsys):
    ada, sgd = "adam 0.1, KL 0.1", "sgd shared lr, KL 1"
    multi = dict(ds="mnist", mode="multimodal", classes="0-2-4-6-8")
    rows = []
    for s, (fa, wa) in enumerate(((60.0, 90.0), (70.0, 85.0), (65.0, 80.0))):   # minority: leads 30, 15, 15
        rows += _t12(**multi, method="fedavg", seed=s, local_acc=90.0 + s, minority=fa, majority=96.0)
        rows += _t12(**multi, method="waffle_ibp", variant=ada, seed=s, local_acc=95.0, minority=wa, majority=97.0)
    rows += _t12(**multi, method="fedavg", seed=3, local_acc=99.0, minority=99.0)        # WAFFLe never ran seed 3
    rows += _t12(**multi, method="waffle_ibp", variant=sgd, seed=0, local_acc=None, minority=None)   # diverged
    rows += _t12("mnist", "unimodal", "waffle_ibp", 0, variant=ada, lr=0.005, local_acc=92.0)   # FedAvg ran at 0.04
    rows += _t12("mnist", "unimodal", "fedavg", 0, local_acc=94.0)
    got = mod.table12_leads(rows)
    key = ("mnist", "multimodal", "0-2-4-6-8", 0.04, ada)
    assert set(got) == {key, ("mnist", "multimodal", "0-2-4-6-8", 0.04, sgd)}   # no pair at another rate
    mino = got[key]["minority"]
    assert mino["n"] == 3 and mino["missing"] == 0                           # FedAvg's seed 3 is not a lost seed
    assert mino["mean"] == pytest.approx(20.0) and mino["sd"] == pytest.approx(75 ** 0.5)   # 30, 15, 15
    assert (mino["min"], mino["max"]) == (15.0, 30.0)
    assert got[key]["local_acc"]["mean"] == pytest.approx(4.0)                # 5, 4, 3
    # the paper's leads: Table 1's minority 93.87 - 67.40, Table 2's multimodal column 95.41 - 91.57
    assert got[key]["paper"]["minority"] == pytest.approx(26.47) and got[key]["paper"]["local_acc"] == pytest.approx(3.84)
    sgd_cell = got["mnist", "multimodal", "0-2-4-6-8", 0.04, sgd]["minority"]
    assert sgd_cell["n"] == 0 and sgd_cell["missing"] == 1                   # diverged: lost, not averaged away
    mod.print_table12_leads(rows)
    out = capsys.readouterr().out
    assert ("| mnist | multimodal | 0-2-4-6-8 | 0.04 | adam 0.1, KL 0.1 | 3 | +4.00 ± 1.00 [+3.00, +5.00] / +3.84 | "
            "+1.00 ± 0.00 [+1.00, +1.00] / -0.70 | +20.00 ± 8.66 [+15.00, +30.00] / +26.47 |") in out
    assert "| mnist | multimodal | 0-2-4-6-8 | 0.04 | sgd shared lr, KL 1 | 0 | — (1 seed(s) lost)" in out


def test_sections_split_at_bold_captions_with_the_comments_above_them(mod):
    """--section: each caption's table with the provenance printed right above it; the first caption takes the
    table's own provenance; a repeated caption is numbered."""
    text = ("<!-- tables1_2 -->\n\n**Table 2** (x)\n\n| a |\n|---|\n\n**Table 1** (y)\n\n| b |\n\n"
            "<!-- heterogeneity -->\n\n**Fig. 7** (z)\n\n| c |\n\n**Fig. 7** again\n\n| d |\n")
    parts = mod.split_sections(text)
    assert list(parts) == ["table-2", "table-1", "fig-7", "fig-7-2"]
    assert parts["table-2"] == "<!-- tables1_2 -->\n\n**Table 2** (x)\n\n| a |\n|---|"
    assert parts["table-1"] == "**Table 1** (y)\n\n| b |"
    assert parts["fig-7"] == "<!-- heterogeneity -->\n\n**Fig. 7** (z)\n\n| c |"
    assert mod.slug("**WAFFLe's lead over FedAvg** (Tables 1-2)") == "waffle-s-lead-over-fedavg"


def test_an_unknown_section_lists_the_real_ones(monkeypatch, capsys):
    import sys
    from fltutor import results
    monkeypatch.setattr(sys, "argv", ["waffle_ibp_table.py", "--section", "table-3"])
    with pytest.raises(SystemExit, match="--section 'table-3': choose one of table-2, table-1, "):
        results.load_script("waffle_ibp_table").main()
    monkeypatch.setattr(sys, "argv", ["waffle_ibp_table.py", "--section", "fig-7", "--body"])
    results.load_script("waffle_ibp_table").main()
    out = capsys.readouterr().out
    assert "**Fig. 7**" not in out and "| dataset | Z | seeds |" in out and out.startswith("<!-- ")


def test_epochs_table_is_the_readmes_table_6_by_hand(mod):
    """Table 6 as the README shows it: FedAvg and WAFFLe beside the paper's, the lead seed by seed beside the
    paper's lead (MNIST unimodal, E = 10: 92.95, 95.10, +2.15), and local minus global accuracy seed by seed."""
    def run(method, seed, local, glob):
        ids = {"table": "Tables 6-7", "dataset": "mnist", "mode": "unimodal", "method": method,
               "variant": "adam 0.1, KL 0.1, alpha/F 0.8, T 0.667" if method == "waffle_ibp" else "",
               "minority_classes": "", "clients": 120, "rounds": 50, "lr": 0.04, "seed": seed,
               "selection_optimizer": "adam" if method == "waffle_ibp" else "", "l1_weight": None, "alpha_ratio": None,
               "num_factors": None, "local_epochs": 10}
        return [{**ids, "metric": "local_acc", "value": local}, {**ids, "metric": "global_acc", "value": glob}]
    rows = (run("fedavg", 0, 92.0, 92.5) + run("fedavg", 1, 94.0, 94.5)
            + run("waffle_ibp", 0, 95.0, 94.0) + run("waffle_ibp", 1, 96.0, 95.0))
    meta = {"parts": [{"command": "python -m fltutor run -f configs/02_epochs.yaml", "settings": {"datasets": ["mnist"],
                                                                                              "modes": ["unimodal"]}},
                      {"command": "python -m fltutor run -f configs/02_ablations.yaml"}]}
    out = mod.epochs_table(rows, meta, "mnist", "unimodal")
    assert len([l for l in out if l.startswith("<!--")]) == 1 and "02_epochs" in out[0]   # only its own command
    # FedAvg 93 ± 1.41, WAFFLe 95.5 ± 0.71; leads +3 and +2 -> +2.50 ± 0.71; lifts +1, +1 and -0.5, -0.5
    assert out[-1] == ("| 10 | 93.00 ± 1.41 / 92.95 | 95.50 ± 0.71 / 95.10 | +2.50 ± 0.71 / +2.15 | +1.00 ± 0.00 | "
                       "-0.50 ± 0.00 |")


def test_table_8_like_for_like_pairs_ibp_and_l1_under_the_same_step_rule_by_hand(mod, capsys):
    def t12(seed, value, variant, method="waffle_ibp", rounds=100):
        return {"dataset": "mnist", "mode": "unimodal", "method": method, "variant": variant, "lr": 0.04,
                "rounds": rounds, "seed": seed, "metric": "local_acc", "value": value}
    adam, sgd = "adam 0.1, KL 0.1, alpha/F 0.8", "sgd shared lr, KL 1, alpha/F 0.8"
    ibp = [t12(0, 97.0, adam), t12(1, 96.0, adam), t12(2, 99.0, adam), t12(0, 93.0, sgd), t12(1, 92.0, sgd)]
    ibp += [t12(0, 50.0, adam, rounds=10), t12(0, 1.0, adam, method="fedavg")]   # another T, another method: out
    l1 = [{**_abl("Table 8", "unimodal", "waffle_ibp_l1", s, v, opt=o, l1_weight=1.0), "variant": var, "rounds": 100}
          for s, v, o, var in ((0, 98.0, "adam", adam), (1, 98.5, "adam", adam), (2, 98.0, "adam", adam),
                               (0, 95.0, "sgd", sgd), (1, 93.0, "sgd", sgd), (2, 94.0, "sgd", sgd))]
    cells = mod.table8_like_for_like(ibp, l1)
    a, s = cells[adam, 0.04, 1.0], cells[sgd, 0.04, 1.0]
    # Adam: L1 - IBP = +1, +2.5, -1 -> mean 2.5/3, sample sd of (1, 2.5, -1); L1 ahead in 2 of 3
    assert a["lead"]["mean"] == pytest.approx(2.5 / 3) and a["lead"]["n"] == 3 and a["ahead"] == 2
    d = [1.0, 2.5, -1.0]
    m = sum(d) / 3
    assert a["lead"]["sd"] == pytest.approx((sum((x - m) ** 2 for x in d) / 2) ** 0.5)
    assert a["ibp"]["mean"] == pytest.approx(292 / 3) and a["l1"]["mean"] == pytest.approx(294.5 / 3)
    # SGD: seed 2 has no IBP run, so only seeds 0 and 1 pair: +2 and +1
    assert s["lead"]["mean"] == pytest.approx(1.5) and s["lead"]["n"] == 2 and s["ahead"] == 2
    mod.print_table8_like_for_like(ibp, {"command": "x"}, l1, {"command": "configs/02_mnist_cpu.yaml"})
    out = capsys.readouterr().out
    assert "| Adam at 0.1 (IBP: KL weight 0.1) | 1 | 3 | 97.33 ± 1.53 | 98.17 ± 0.29 | +0.83 ± 1.76 [-1.00, +2.50] " \
           "| 2 of 3 | 96.23 / 96.03 |" in out
    assert "| SGD at the shared 0.04, as Algorithm 2 is written (IBP: KL weight 1) | 1 | 2 | 92.50 ± 0.71 | " \
           "94.00 ± 1.00 | +1.50 ± 0.71 (1 seed(s) lost) [+1.00, +2.00] | 2 of 2 |" in out   # seed 2: L1 alone
    assert out.count("<!--") == 1    # provenance: Tables 1-2's part has no settings; the ablation's is named once


def test_selections_table_takes_the_minoritys_scores_and_lead_and_every_clients_overlap_by_hand(mod):
    def t67(mode, m, seed, local, minority):
        r = _abl("Tables 6-7", mode, m, seed, local, opt="adam" if m == "waffle_ibp" else "", lr=0.04, local_epochs=20)
        return [r, {**r, "metric": "minority", "value": minority}]
    probe = []
    for seed, (own, prior, mino, minp) in enumerate(((96.0, 94.0, 80.0, 70.0), (97.0, 94.0, 84.0, 70.0))):
        probe += _probe("multimodal", 20, seed, "all", own=own, prior_mean=prior, jaccard_same_fc1=0.9,
                        jaccard_none_fc1=0.6 + 0.1 * seed, prior_distance_fc1=0.05)
        probe += _probe("multimodal", 20, seed, "minority", own=mino, prior_mean=minp)
    abl = (t67("multimodal", "fedavg", 0, 95.0, 60.0) + t67("multimodal", "waffle_ibp", 0, 96.0, 80.0)
           + t67("multimodal", "fedavg", 1, 95.0, 70.0) + t67("multimodal", "waffle_ibp", 1, 97.0, 84.0))
    lines = mod.selections_table(probe, {"command": "probe"}, abl, "mnist")
    row = next(line for line in lines if line.startswith("| multimodal"))
    # lead: the minority's, 80 - 60 and 84 - 70 -> +17 ± 4.24; own - prior mean: the minority's 10 and 14 -> +12;
    # overlap: all clients, 0.9 / mean(0.6, 0.7); the prior mean - FedAvg: all clients, 94 - 95 twice -> -1
    assert row.startswith("| multimodal, minority | 0.1 | 20 | 2 | +17.00 ± 4.24 | +12.00 ± 2.83 | — | — | "
                          "0.900 / 0.650 | 0.050 | -1.00 ± 0.00 |"), row
    assert lines[0] == "<!-- probe |  | None | None | commit None | None s -->"
