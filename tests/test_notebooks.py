"""Integration: every notebook runs headless through the CLI (papermill) with its quick defaults.

The notebooks hold their own checks (scratch vs library, partition properties); here we
also check what they write: a results.json with summary rows, and the CLI's printed summary.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("nb")
    env = {**os.environ, "FLTUTOR_DATA": "bundled"}  # the bundled subsets, whatever data/ holds
    proc = subprocess.run(
        [sys.executable, "-m", "fltutor", "run", "--out", str(out), "--no-progress",
         "-p", "run_root", str(out / "runs")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    # exit 3: a run diverged (the CLI says which); the quick defaults' known cases are checked below
    assert proc.returncode in (0, 3), proc.stdout[-3000:] + proc.stderr[-3000:]
    return out, proc.stdout, proc.returncode


# Runs the quick defaults are known to lose (reported, never hidden): at the paper's lr = 0.1 on 160
# images per agent, SCAFFOLD-based WAFFLE turns non-finite on distribution B at round 11 of 12
# (at lr = 0.05 nothing diverges, but then no personalized method beats chance on A*).
KNOWN_QUICK_DIVERGENCES = {("04_weighted_averaging_personalization", "mnist B waffle_weighted (seed=0, lr=0.1)")}


def test_only_the_known_quick_runs_diverge_and_the_cli_says_so(cli_run):
    out, stdout, rc = cli_run
    found = {(nb.stem, e["what"]) for nb in NOTEBOOKS
             for e in json.loads((out / nb.stem / "results.json").read_text()).get("diverged", [])}
    assert found <= KNOWN_QUICK_DIVERGENCES, f"new divergences in the quick defaults: {found - KNOWN_QUICK_DIVERGENCES}"
    assert rc == (3 if found else 0)
    for nb, what in found:
        assert f"[fltutor] {nb}: {what} diverged at round" in stdout


def test_every_notebook_has_a_parameters_cell():
    for nb in NOTEBOOKS:
        cells = json.loads(nb.read_text())["cells"]
        tagged = [i for i, c in enumerate(cells) if "parameters" in c.get("metadata", {}).get("tags", [])]
        assert tagged == [2], f"{nb.name}: the third cell must be the only one tagged 'parameters'"


@pytest.mark.parametrize("nb", [p.stem for p in NOTEBOOKS])
def test_notebook_writes_results(cli_run, nb):
    out, _, _ = cli_run
    res = json.loads((out / nb / "results.json").read_text())
    assert res["data_source"] == "bundled"
    assert res["summary"] and all({"what", "ours", "paper"} <= set(r) for r in res["summary"])
    assert (out / nb / f"{nb}.ipynb").exists()


def test_fedavg_scratch_matches_engine(cli_run):
    out, _, _ = cli_run
    res = json.loads((out / "01_fedavg_and_baselines" / "results.json").read_text())
    assert res["scratch_vs_engine_max_abs_diff"] < 1e-8
    rows = {r["what"]: r for r in res["summary"]}
    # the phenomenon the notebook teaches: FedAvg serves the majority far better than the minority
    assert rows["mnist fedavg multimodal gap"]["ours"] > 10


def test_cli_prints_summary(cli_run):
    _, stdout, _ = cli_run
    assert "=== fltutor summary ===" in stdout
    assert "multimodal majority:minority data ratio" in stdout
