"""scripts/summarize_runs.py: finished runs grouped over seeds into one table row each, numbers as by hand."""
import importlib.util
import json
import statistics
import sys
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("summarize_runs",
                                                  Path(__file__).parents[1] / "scripts" / "summarize_runs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _write(root, folder, method, seed, *, rounds_done=3, per_client=None, groups=None, global_acc=None, **extra):
    """A results.json as fltutor.federation.run leaves it, with only the keys the script reads."""
    settings = {"rounds": 3, "local_epochs": 5, "lr": 0.04, "seed": seed, "eval_every": 1, **extra}
    res = {"method": method, "settings": settings, "rounds_done": rounds_done, "groups": groups,
           "final": {"local_acc": statistics.mean(per_client), "local_acc_per_client": per_client}}
    if global_acc is not None:
        res["last10_global_acc"], res["best_global_acc"] = global_acc
    path = root / "cells" / f"{folder}-seed{seed}-0123456789ab" / "results.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(res))


@pytest.fixture
def run_root(tmp_path):
    # WAFFLe-like: 3 seeds, clients 0-1 the majority (group 0), client 2 the minority (group 1)
    for seed, acc in enumerate([[90.0, 94.0, 80.0], [92.0, 96.0, 84.0], [94.0, 98.0, 88.0]]):
        _write(tmp_path, "mnist-multimodal-fedavg", "fedavg", seed, per_client=acc, groups=[0, 0, 1])
    _write(tmp_path, "mnist-multimodal-fedavg", "fedavg", 3, rounds_done=2, per_client=[0.0, 0.0, 0.0],
           groups=[0, 0, 1])                                                  # unfinished: left out
    _write(tmp_path, "mnist-label10-fedavg", "fedavg", 0, per_client=[70.0, 80.0], global_acc=(71.5, 73.25),
           momentum=0.9)                                                      # one seed, a non-default setting
    return tmp_path


def test_runs_differing_only_in_seed_make_one_row_with_mean_and_sample_std(script, run_root):
    table = script.summarize(run_root)
    assert list(table["cell"]) == ["mnist-label10-fedavg [momentum=0.9]", "mnist-multimodal-fedavg"]
    waffle = table.iloc[1]
    # per seed: means 88, 90.67, 93.33; majority 92, 94, 96; minority 80, 84, 88; gap 12, 10, 8
    assert waffle["seeds"] == "0, 1, 2" and waffle["lr"] == "0.04" and waffle["E"] == 5 and waffle["rounds"] == 3
    assert waffle["mean"] == "90.67 ± 2.67"
    assert waffle["majority"] == "94.00 ± 2.00" and waffle["minority"] == "84.00 ± 4.00"
    assert waffle["gap"] == "10.00 ± 2.00"
    assert waffle["last-10"] == "" and waffle["best"] == ""
    gma = table.iloc[0]
    assert gma["seeds"] == "0" and gma["mean"] == "75.00" and gma["last-10"] == "71.50" and gma["best"] == "73.25"
    assert gma["majority"] == "" and gma["variance"] == ""


def test_the_cli_prints_a_markdown_table_per_run_root(script, run_root, tmp_path_factory, monkeypatch, capsys):
    empty = tmp_path_factory.mktemp("empty")
    monkeypatch.setattr(sys, "argv", ["summarize_runs.py", str(run_root), str(empty)])
    script.main()
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"== {run_root}"
    header, rule, *rows = [[c.strip() for c in line.strip("|").split("|")] for line in out[1:5]]
    assert header == ["cell", "lr", "E", "rounds", "seeds", "mean", "majority", "minority", "gap", "variance",
                      "last-10", "best"] and all(set(c) <= set(":-") for c in rule)
    assert rows[1][:9] == ["mnist-multimodal-fedavg", "0.04", "5", "3", "0, 1, 2", "90.67 ± 2.67", "94.00 ± 2.00",
                           "84.00 ± 4.00", "10.00 ± 2.00"]
    assert out[5:] == [f"== {empty}", "(no finished runs)"]
