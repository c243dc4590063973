"""scripts/privacy_table.py: the README's privacy tables from tidy rows, checked by hand."""

import sys

import pytest


@pytest.fixture(scope="module")
def mod(load_script):
    return load_script("privacy_table")


def _rows(name, method, view, guess, shadow_accs):
    return [{"dataset": "mnist", "name": name, "method": method, "seed": s, "view": view, "guess": guess, "client": 0,
             "attack": "shadow", "metric": "accuracy", "value": v} for s, v in enumerate(shadow_accs)]


def test_waffle_ibp_shows_the_b_equals_one_guess_under_its_prior_row_and_l1_names_its_prior(mod, monkeypatch, capsys):
    rows = (_rows("waffle_ibp", "waffle_ibp", "message", "prior", [0.50, 0.54])
            + _rows("waffle_ibp", "waffle_ibp", "message", "ones", [0.55, 0.57])
            + _rows("waffle_ibp", "waffle_ibp", "message", "true", [0.90, 0.90])   # attacked, but not a table row
            + _rows("waffle_ibp_l1", "waffle_ibp_l1", "message", "prior", [0.53, 0.53])
            + _rows("fedavg", "fedavg", "message", "", [0.52, 0.52]))
    monkeypatch.setattr(mod.results, "read_table", lambda folder, name: (rows, {"command": "c"}))
    monkeypatch.setattr(sys, "argv", ["privacy_table.py", "mnist"])
    mod.main()
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ") and "---" not in line][1:]
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines]
    assert [c[:2] for c in cells] == [["waffle_ibp", "message (prior)"], ["waffle_ibp", "message (b = 1)"],
                                      ["waffle_ibp_l1", "message (prior, b = 1)"], ["fedavg", "message"]]
    assert [c[2] for c in cells] == ["52.0 ± 2.8", "56.0 ± 1.4", "53.0 ± 0.0", "52.0 ± 0.0"]   # mean, sample sd (%)


def test_paired_block_is_waffles_message_minus_fedavgs_seed_by_seed(mod, capsys):
    """Three seeds by hand: WAFFLe (prior b) minus FedAvg shadow AUC = -0.02, -0.01, +0.00 -> -1.00 ± 1.00 (x100),
    lower in 2 of 3; a guess with no rows and a metric with no rows show as absent, not as zero."""
    def row(method, guess, seed, v, metric="auc"):
        return {"dataset": "mnist", "name": method, "method": method, "seed": seed, "view": "message", "guess": guess,
                "client": 0, "attack": "shadow", "metric": metric, "value": v}
    rows = ([row("fedavg", "", s, v) for s, v in enumerate([0.55, 0.53, 0.50])]
            + [row("waffle_ibp", "prior", s, v) for s, v in enumerate([0.53, 0.52, 0.50])]
            + [row("fedavg", "", 0, 0.9, "accuracy"), row("waffle_ibp", "prior", 0, 0.1, "accuracy")])
    mod.paired_block(rows)
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("| prior mean"))
    assert [c.strip() for c in line.strip("|").split("|")] == ["prior mean", "-1.00 ± 1.00 (lower in 2 of 3)", "–",
                                                                "–", "–"]
    assert "| b = 1 |" not in out
    mod.paired_block([row("fedavg", "", 0, 0.5)])   # nothing of WAFFLe's: no block at all
    assert capsys.readouterr().out == ""
