"""Notebooks in CI. ``pytest`` runs every numbered notebook under nbval (pyproject: ``--nbval-lax`` over
notebooks/), each ending with a self-check cell; here we check that nothing escapes that, and run one
notebook the researchers' way: through the CLI (papermill), with injected parameters, from a directory
other than the repository root. No notebook runs twice.
"""
import json
import os
import subprocess
import sys
try:
    import tomllib
except ModuleNotFoundError:   # Python 3.10
    tomllib = None
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
PAPERMILL_NOTEBOOK = "00_data_and_partitions"   # the fastest; the other notebooks run under nbval only


def test_every_notebook_runs_in_ci_under_nbval_and_checks_itself():
    if tomllib is None:
        pytest.skip("reading pyproject.toml needs Python 3.11's tomllib")
    opts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    args = opts["addopts"].split()
    assert "--nbval-lax" in args and "notebooks" in opts["testpaths"], "pytest no longer runs the notebooks"
    ignored = [a.split("=", 1)[1] for a in args if a.startswith("--ignore")]
    assert NOTEBOOKS and len(NOTEBOOKS) >= 6
    for nb in NOTEBOOKS:
        rel = nb.relative_to(ROOT).as_posix()
        assert not any(rel.startswith(i.rstrip("/")) for i in ignored), f"{rel} is ignored by pytest"
        cells = json.loads(nb.read_text())["cells"]
        last = "".join(cells[-1]["source"])
        assert cells[-1]["cell_type"] == "code" and "check_notebook_results" in last, \
            f"{nb.name}: the last cell must be the self-check (fltutor.results.check_notebook_results)"
    # nothing numbered lives outside notebooks/ where neither nbval nor papermill would find it
    stray = [p for p in ROOT.rglob("[0-9][0-9]_*.ipynb")
             if p.parent != ROOT / "notebooks" and not {"runs", ".ipynb_checkpoints", ".git"} & set(p.parts)]
    assert not stray, f"numbered notebooks outside notebooks/: {stray}"


def test_every_notebook_has_a_parameters_cell():
    for nb in NOTEBOOKS:
        cells = json.loads(nb.read_text())["cells"]
        tagged = [i for i, c in enumerate(cells) if "parameters" in c.get("metadata", {}).get("tags", [])]
        assert tagged == [2], f"{nb.name}: the third cell must be the only one tagged 'parameters'"


def test_cli_runs_a_notebook_with_parameters_from_another_directory(tmp_path):
    # the sweep path: python -m fltutor run NN -p ... from anywhere; the notebook runs in notebooks/
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "FLTUTOR_DATA": "bundled", "FLTUTOR_SELFCHECK": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "fltutor", "run", "00", "-p", "num_clients", "40", "-p", "seed", "3",
                           "--out", str(out), "--no-progress"],
                          cwd=elsewhere, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    res = json.loads((out / PAPERMILL_NOTEBOOK / "results.json").read_text())
    assert res["data_source"] == "bundled"
    executed = json.loads((out / PAPERMILL_NOTEBOOK / f"{PAPERMILL_NOTEBOOK}.ipynb").read_text())["cells"]
    injected = [c for c in executed if "injected-parameters" in c.get("metadata", {}).get("tags", [])]
    assert injected and "num_clients = 40" in "".join(injected[0]["source"]) and "seed = 3" in "".join(injected[0]["source"])
    assert "self-check passed" in json.dumps(executed[-1]["outputs"])
    assert "=== fltutor summary ===" in proc.stdout and "multimodal majority:minority data ratio" in proc.stdout
    assert not list(elsewhere.iterdir()), "the run wrote into the directory it was started from"
