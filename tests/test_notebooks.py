"""Notebooks in CI. ``pytest`` runs every numbered notebook under nbval (pyproject: ``--nbval-lax`` over
notebooks/), each ending with a self-check cell; here we check that nothing escapes that, and run one
notebook the researchers' way: through the CLI (papermill), with injected parameters, from a directory
other than the repository root. No notebook runs twice.
"""
import json
import os
import re
import shutil
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


def _module_scope_loop_names(tree):
    """Names bound by for-loops (and with ... as, walrus) at a cell's module scope: not inside a function, class,
    lambda or comprehension, which have scopes of their own."""
    import ast
    out, todo = set(), list(ast.iter_child_nodes(tree))
    while todo:
        n = todo.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.ListComp, ast.SetComp,
                          ast.DictComp, ast.GeneratorExp)):
            continue
        targets = [n.target] if isinstance(n, (ast.For, ast.AsyncFor, ast.NamedExpr)) else \
            [i.optional_vars for i in n.items if i.optional_vars] if isinstance(n, ast.With) else []
        out |= {t.id for tgt in targets for t in ast.walk(tgt) if isinstance(t, ast.Name)}
        todo.extend(ast.iter_child_nodes(n))
    return out


def test_no_loop_in_a_notebook_rebinds_a_parameter():
    """A module-level ``for ..., lr in ...`` in a figure cell once rebound notebook 02's ``lr`` (0.02) to the last
    group's 0.04, and the results cell after it labelled a multimodal run with the wrong rate."""
    import ast
    for nb in NOTEBOOKS:
        cells = json.loads(nb.read_text())["cells"]
        params = {t.target.id for t in ast.parse("".join(cells[2]["source"])).body
                  if isinstance(t, ast.AnnAssign) and isinstance(t.target, ast.Name)}
        assert params, f"{nb.name}: no annotated parameters in the parameters cell"
        for c in cells[3:]:
            if c["cell_type"] != "code":
                continue
            src = "".join(c["source"])
            clash = _module_scope_loop_names(ast.parse(src)) & params
            assert not clash, f"{nb.name}, cell {c.get('id')}: a loop rebinds the parameter(s) {sorted(clash)}"


def test_every_notebook_is_valid_nbformat_with_unique_cell_ids():
    """nbformat 4.5 wants an id on every cell (a cell added by hand without one only warns today)."""
    import nbformat
    for nb in NOTEBOOKS:
        doc = json.loads(nb.read_text())
        ids = [c.get("id") for c in doc["cells"]]
        missing = [i for i, x in enumerate(ids) if not x]
        assert not missing, f"{nb.name}: cells {missing} have no id"
        assert len(set(ids)) == len(ids), f"{nb.name}: cell ids repeat"
        nbformat.validate(nbformat.reads(nb.read_text(), as_version=4))


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory):
    """Notebook 00 through the CLI, the sweep path: parameters injected, started from another directory."""
    tmp = tmp_path_factory.mktemp("cli")
    out, elsewhere = tmp / "out", tmp / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "FLTUTOR_DATA": "bundled", "FLTUTOR_SELFCHECK": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "fltutor", "run", "00", "-p", "num_clients", "40", "-p", "seed", "3",
                           "--out", str(out), "--no-progress"],
                          cwd=elsewhere, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out, elsewhere, proc.stdout


def test_cli_runs_a_notebook_with_parameters_from_another_directory(cli_run):
    out, elsewhere, stdout = cli_run
    res = json.loads((out / PAPERMILL_NOTEBOOK / "results.json").read_text())
    assert res["data_source"] == "bundled"
    executed = json.loads((out / PAPERMILL_NOTEBOOK / f"{PAPERMILL_NOTEBOOK}.ipynb").read_text())["cells"]
    injected = [c for c in executed if "injected-parameters" in c.get("metadata", {}).get("tags", [])]
    assert injected and "num_clients = 40" in "".join(injected[0]["source"]) and "seed = 3" in "".join(injected[0]["source"])
    assert "self-check passed" in json.dumps(executed[-1]["outputs"])
    assert "=== fltutor summary ===" in stdout and "multimodal majority:minority data ratio" in stdout
    assert not list(elsewhere.iterdir()), "the run wrote into the directory it was started from"


# ---- pages to read without running, checked in a real browser --------------------------------------
def _chromium():
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("no chromium on PATH (Debian: apt-get install chromium; .ci/run installs it). Browser "
                    "downloads such as Playwright's need the internet, so we use the system package")
    return exe


def rendered_dom(page: Path) -> str:
    """The page's DOM after headless Chromium has loaded and laid it out."""
    proc = subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000",
                           "--dump-dom", page.resolve().as_uri()], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "<html" in proc.stdout.lower(), proc.stderr[-2000:]
    return proc.stdout


def page_problems(dom: str) -> list[str]:
    """What a reader would see wrong: a traceback, or a figure printed as text instead of drawn."""
    problems = []
    if "Traceback (most recent call last)" in dom or re.search(r"\w+Error\s*</span>\s*Traceback", dom):
        problems.append("a cell shows a traceback")
    if re.search(r"&lt;Figure size \d+x\d+ with \d+ Axes&gt;", dom):   # shown only when no image came with it
        problems.append("a figure is text, not an image")
    return problems


def test_index_and_notebook_pages_load_in_a_browser(cli_run):
    out, _, _ = cli_run
    _chromium()
    index = rendered_dom(out / "index.html")
    assert f"{PAPERMILL_NOTEBOOK}/{PAPERMILL_NOTEBOOK}.html" in index and "<table" in index
    assert "multimodal majority:minority data ratio" in index                 # the summary table is there
    page = rendered_dom(out / PAPERMILL_NOTEBOOK / f"{PAPERMILL_NOTEBOOK}.html")
    executed = json.loads((out / PAPERMILL_NOTEBOOK / f"{PAPERMILL_NOTEBOOK}.ipynb").read_text())["cells"]
    figures = sum("image/png" in o.get("data", {}) for c in executed for o in c.get("outputs", []))
    assert figures > 0 and len(re.findall(r"<img[^>]+src=\"data:image/png", page)) == figures   # every figure drawn
    assert page_problems(page) == []


def test_the_page_check_sees_a_traceback_and_a_figure_left_as_text(tmp_path):
    # the check above must be able to fail: a notebook page with an error and a figure repr but no image
    import nbformat
    from fltutor.__main__ import write_html
    _chromium()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1/0", outputs=[nbformat.v4.new_output(
        "error", ename="ZeroDivisionError", evalue="division by zero",
        traceback=["ZeroDivisionError                         Traceback (most recent call last)", "----> 1 1/0"])]),
        nbformat.v4.new_code_cell("plt.show()", outputs=[nbformat.v4.new_output(
            "display_data", data={"text/plain": "<Figure size 640x480 with 1 Axes>"})])])
    path = tmp_path / "broken.ipynb"
    nbformat.write(nb, path)
    problems = page_problems(rendered_dom(write_html(path)))
    assert problems == ["a cell shows a traceback", "a figure is text, not an image"]


def _refused_before_training(tmp_path, notebook: str, *params: str) -> str:
    """Run ``notebook`` on the bundled data with ``params`` (-p NAME VALUE ...); assert that it failed and that
    no run folder exists (nothing trained first); return what it printed."""
    env = {**os.environ, "FLTUTOR_DATA": "bundled",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "fltutor", "run", notebook, *params, "--out", str(tmp_path / "out"),
                           "-p", "run_root", str(tmp_path / "root"), "--no-progress"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0, text[-3000:]
    assert not (tmp_path / "root").exists(), "it trained something before refusing"
    return text


def test_notebook_03_refuses_a_run_with_nothing_in_it_before_training(tmp_path):
    """settings=[] with grid_seeds=[] would skip every table and fail late: the derived-settings cell says so first."""
    text = _refused_before_training(tmp_path, "03", "-p", "settings", "[]", "-p", "grid_seeds", "[]")
    assert "settings=[] and grid_seeds=[]: nothing to run" in text, text[-3000:]


@pytest.mark.parametrize("settings,expected", [
    ("[[mnist, colour, 20]]", "settings (skew): got the string 'colour'; expected one of ['label', 'iid', 'quantity', 'feature', "
                              "'mixed', 'dirichlet', 'feature-shared', 'mixed-shared']"),
    ("[[mnist, mixed]]", "settings: got the row ['mnist', 'mixed']; each row is [dataset, skew, clients]"),
])
def test_notebook_03_refuses_a_bad_settings_row_before_training(tmp_path, settings, expected):
    """A Tables 2-3 row the notebook cannot build used to fail after the grid had trained; the check comes first."""
    text = _refused_before_training(tmp_path, "03", "-p", "settings", settings)
    assert expected in text, text[-3000:]


def test_notebook_04_refuses_clipping_for_methods_that_cannot_clip_before_training(tmp_path):
    """grad_clip_norm with APFL in methods would train four methods and then fail on APFL: it is refused first."""
    text = _refused_before_training(tmp_path, "04", "-p", "grad_clip_norm", "5")
    assert "grad_clip_norm=5.0: ['apfl'] train with their own local step rule" in text, text[-3000:]


def test_notebook_02_refuses_a_bad_pfedme_rate_before_training(tmp_path):
    """pFedMe's personal rate is a notebook parameter (FMNIST's CNN needs one below Dinh et al.'s 0.1): a rate
    of 0 is refused, named, in the derived-settings cell, before any data loads or any method trains."""
    text = _refused_before_training(tmp_path, "02", "-p", "pfedme_lr", "0")
    assert "pfedme_lr" in text and "Dinh et al. use 0.1" in text, text[-3000:]


@pytest.mark.parametrize("params,expected", [
    (("-p", "client_scale", "0"), "client_scale: got 0.0; expected a finite number > 0"),
    (("-p", "sweep_rounds", "0"), "sweep_rounds: got 0; expected an integer >= 1"),
    (("-p", "methods", "[weight_erosion]"), "methods: ['weight_erosion'] train every client every round, but "
                                            "client_fraction=0.25"),
    (("-p", "methods", "[]"), "methods: got []"),
])
def test_notebook_01_refuses_bad_settings_before_training(tmp_path, params, expected):
    """client_scale 0 used to run the whole notebook on 2 clients without a word, sweep_rounds 0 was reported as
    "rounds", and a full-participation method or an empty list failed only after three training cells."""
    text = _refused_before_training(tmp_path, "01", *params)
    assert expected in text, text[-3000:]


def test_notebook_05_runs_a_method_subset_without_fedavg_or_waffle_and_records_the_command(tmp_path):
    """The privacy audit of one method at a time (pFedMe was audited so, -p methods "[pfedme]"): the gradient
    inversion section compares FedAvg with WAFFLe and is skipped, not a KeyError after every federation has
    trained; the summary lists the method's own leak, and results/ records the command with its -p overrides."""
    env = {**os.environ, "FLTUTOR_DATA": "bundled", "FLTUTOR_SELFCHECK": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    res = tmp_path / "res"
    tiny = {"methods": "[local]", "num_clients": "3", "train_per_client": "60", "heldout_per_client": "30",
            "attacker_size": "300", "rounds": "1", "local_epochs": "1", "shadow_epochs": "1", "inversion_steps": "5",
            "results_dir": str(res)}
    params = [a for k, v in tiny.items() for a in ("-p", k, v)]
    proc = subprocess.run([sys.executable, "-m", "fltutor", "run", "05", *params, "--out", str(tmp_path / "out"),
                           "-p", "run_root", str(tmp_path / "root"), "--no-progress"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert (res / "audit_mnist.csv").exists() and not (res / "gradient_inversion_mnist.csv").exists()
    assert '-p methods [local]' in json.loads((res / "audit_mnist.json").read_text())["command"]
    summary = json.loads((tmp_path / "out" / "05_privacy_audit" / "results.json").read_text())["summary"]
    assert any(r["what"].startswith("local: shadow MIA accuracy on its client") and r["ours"] is not None
               for r in summary)
