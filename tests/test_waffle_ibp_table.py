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
    assert "selections stepped by adam" in out and "rate 0.1" in out
