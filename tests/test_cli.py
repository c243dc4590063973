"""The command line (``python -m fltutor run``): parameters are checked against the notebook before
anything runs, YAML reads 1e-3 as a float, and a diverged run is reported and sets the exit status.

Uses the tiny notebook tests/fixtures/cli_params.ipynb (one parameter of each type; its results.json
echoes what arrived), so only two tests start a kernel.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fltutor import __main__ as cli

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "cli_params.ipynb"
FIXTURE_PARAMS = ["lr", "rounds", "label", "verbose", "seeds", "extra", "maybe", "diverge_at"]


@pytest.fixture
def no_kernel(monkeypatch):
    """Fail the test if a notebook would be executed."""
    import papermill

    def refuse(*args, **kwargs):
        raise AssertionError("a notebook was executed")

    monkeypatch.setattr(papermill, "execute_notebook", refuse)


@pytest.fixture
def kernel_env(monkeypatch):
    """Undo the environment the CLI sets for its kernels (FLTUTOR_HEADLESS, PYTHONPATH) after the test."""
    for name in ("FLTUTOR_HEADLESS", "PYTHONPATH"):
        monkeypatch.setenv(name, os.environ.get(name, ""))


def usage_error(capsys, *argv) -> str:
    """Run the CLI in-process and return its error message; it must exit with status 2."""
    with pytest.raises(SystemExit) as exc:
        cli.main(["run", *map(str, argv)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


# ---- help, notebooks, unknown names --------------------------------------------------------------
def test_help():
    for argv in (["--help"], ["run", "--help"]):
        proc = subprocess.run([sys.executable, "-m", "fltutor", *argv], cwd=ROOT, capture_output=True, text=True,
                              timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert "usage: python -m fltutor" in proc.stdout
    assert "-p NAME VALUE" in proc.stdout and "Exit status" in proc.stdout


def test_help_lists_every_notebook_with_its_title(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for nb in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        title = json.loads(nb.read_text())["cells"][0]["source"][0].split("·", 1)[1].strip()
        assert f"{nb.stem}" in out and title in out


def test_run_help_with_a_notebook_lists_its_parameters(capsys, no_kernel):
    assert cli.main(["run", str(FIXTURE), "--help"]) == 0
    out = capsys.readouterr().out
    assert "usage: python -m fltutor run" in out
    listed = {line.split()[0] for line in out.split("parameters (set with")[1].splitlines()[2:] if line.strip()}
    assert listed == set(FIXTURE_PARAMS)          # every parameter, and nothing else
    import papermill as pm
    for name, spec in pm.inspect_notebook(str(FIXTURE)).items():   # type and default as papermill reads them
        if name in cli.SET_BY_CLI:
            continue
        line = next(l for l in out.splitlines() if l.split() and l.split()[0] == name)
        assert spec["inferred_type_name"] in line and str(spec["default"]) in line


def test_slowest_sections_add_up_each_headings_cells(tmp_path):
    def code(start, end):
        return {"cell_type": "code", "source": "x = 1", "metadata": {"papermill": {
            "start_time": f"2026-11-27T10:00:{start:06.3f}Z", "end_time": f"2026-11-27T10:00:{end:06.3f}Z"}}}
    md = lambda text: {"cell_type": "markdown", "source": text, "metadata": {}}   # noqa: E731
    cells = [code(0, 1), md("## 1. Toy\ntext"), code(1, 3), code(3, 6.5), md("plain text, no heading"),
             code(6.5, 7), md("### 2b. Grid"), code(7, 17), md("## 3. Unrun"),
             {"cell_type": "code", "source": "y", "metadata": {"papermill": {"start_time": None, "end_time": None}}}]
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps({"cells": cells}))
    got = cli.slowest_sections(path, n=5)
    # by hand: the grid 10 s, the toy 2 + 3.5 + 0.5 = 6 s (a heading-less markdown cell does not start a section),
    # 1 s before the first heading; 17 s in all; the unrun cell counts nowhere
    assert [(h, round(t, 3), round(share, 4)) for h, t, share in got] == [
        ("2b. Grid", 10.0, round(10 / 17, 4)), ("1. Toy", 6.0, round(6 / 17, 4)), ("(before the first heading)", 1.0, round(1 / 17, 4))]


def test_run_without_papermill_says_how_to_get_it(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "papermill", None)   # `import papermill` now raises ImportError
    with pytest.raises(SystemExit) as exc:
        cli.main(["run", str(FIXTURE), "--help"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "papermill cannot be imported" in err and "pip install -r requirements.txt" in err


@pytest.mark.parametrize("nb", sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")), ids=lambda p: p.name[:2])
def test_papermill_reads_every_parameter_the_cell_assigns(nb):
    # Python's own parser is the reference: papermill's line regex drops a parameter (with only a
    # warning) when its comment holds an '=' or '<=', and the CLI would then refuse '-p' for that name
    import ast

    import nbformat
    import papermill as pm

    cell = next(c for c in nbformat.read(nb, 4).cells if "parameters" in c.metadata.get("tags", []))
    assigned = {(s.target if isinstance(s, ast.AnnAssign) else s.targets[0]).id
                for s in ast.parse(cell.source).body if isinstance(s, (ast.Assign, ast.AnnAssign))}
    assert assigned and set(pm.inspect_notebook(str(nb))) == assigned


def test_parameter_help_keeps_a_comment_continued_on_the_next_line():
    nb = ROOT / "notebooks" / "03_gradient_masked_averaging.ipynb"
    lines = cli.parameter_help(nb).splitlines()
    i = next(i for i, l in enumerate(lines) if l.split() and l.split()[0] == "fig3a_lr")
    assert lines[i + 1].strip().startswith("clients in settings, whose FedAvg runs it reuses")
    assert lines[i + 2].split()[0] == "tau_sweep"       # the next parameter, nothing else attached


def test_unknown_notebook(capsys, no_kernel):
    err = usage_error(capsys, "77")
    assert "notebook '77' matches nothing" in err and "01_fedavg_and_baselines" in err


def test_unknown_parameter_is_refused_before_anything_runs(tmp_path):
    # a real process: exit status 2, one message, no traceback, nothing written
    proc = subprocess.run([sys.executable, "-m", "fltutor", "run", str(FIXTURE), "-p", "lrr", "0.1",
                           "--out", str(tmp_path / "out")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "running" not in proc.stdout
    err = proc.stderr.split("error: ", 1)[1]
    assert err.startswith("-p lrr: 'lrr' is not a parameter of the notebook (did you mean 'lr'?)")
    assert all(f"{name} (" in err for name in FIXTURE_PARAMS), err
    assert "Nothing was run" in err
    assert not (tmp_path / "out").exists()


def test_unknown_config_key_names_the_file(capsys, no_kernel, tmp_path):
    cfg = tmp_path / "params.yaml"
    cfg.write_text("lr: 0.1\nrounds_: 3\n")
    err = usage_error(capsys, FIXTURE, "-f", cfg)
    assert f"{cfg}: 'rounds_' is not a parameter" in err and "did you mean 'rounds'" in err


def test_out_dir_is_set_by_the_cli(capsys, no_kernel):
    assert "use --out DIR" in usage_error(capsys, FIXTURE, "-p", "out_dir", "/tmp/x")


def test_a_name_some_notebooks_lack_goes_only_to_the_others():
    # several notebooks: a name must belong to at least one of them, and is passed only to those that have it
    nb00 = ROOT / "notebooks" / "00_data_and_partitions.ipynb"
    plan = cli.plan_parameters([FIXTURE, nb00], {"lr": (0.5, "-p lr"), "seed": (1, "-p seed")})
    assert plan == {FIXTURE: {"lr": 0.5}, nb00: {"seed": 1}}
    with pytest.raises(cli.CLIError, match="not a parameter of any of the notebooks"):
        cli.plan_parameters([FIXTURE, nb00], {"nope": (1, "-p nope")})


# ---- types ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,value,expected", [
    ("rounds", "ten", "got the string 'ten'; expected an integer"),
    ("rounds", "2.5", "got 2.5; expected an integer"),
    ("rounds", "true", "got True (a bool); expected an integer"),
    ("lr", "abc", "got the string 'abc'; expected a finite number"),
    ("lr", "'1e-3'", "A quoted number is text"),
    ("lr", "nan", "NaN and infinity are never allowed"),   # YAML reads nan as text; it was told to drop quotes
    ("lr", ".nan", "got nan; expected a finite number"),
    ("lr", "null", "got None; expected a finite number"),
    ("verbose", "1", "got 1; expected true or false"),
    ("label", "12", "got 12; expected text"),
    ("label", "note: more", "YAML read the text as a mapping (': ' starts one); put it in double quotes"),
    ("seeds", "0", "got 0; expected a list"),
    ("extra", "[1]", "got [1] (list); expected a mapping"),
    ("maybe", "abc", "expected a finite number or null"),
])
def test_wrong_type_names_parameter_value_and_type(capsys, no_kernel, name, value, expected):
    err = usage_error(capsys, FIXTURE, "-p", name, value)
    assert f"parameter {name!r} got" in err and expected in err, err
    assert "(its default is" in err


def test_values_that_fit():
    given = {"lr": (1, "-p lr"), "maybe": (None, "-p maybe"), "label": ("x", "-p label"),
             "seeds": ([0, 1], "-p seeds"), "extra": ({"a": 1}, "-p extra"), "verbose": (True, "-p verbose")}
    plan = cli.plan_parameters([FIXTURE], given)[FIXTURE]
    assert plan == {"lr": 1.0, "maybe": None, "label": "x", "seeds": [0, 1], "extra": {"a": 1}, "verbose": True}
    assert isinstance(plan["lr"], float), "an integer given for a float parameter arrives as a float"


def test_invalid_yaml_value(capsys, no_kernel):
    assert "not valid YAML" in usage_error(capsys, FIXTURE, "-p", "seeds", "[0, 1")


# ---- YAML: 1e-3 is a float -----------------------------------------------------------------------
@pytest.mark.parametrize("text,value", [
    ("1e-3", 0.001), ("5e-4", 0.0005), ("1E3", 1000.0), ("-2e-3", -0.002), ("+1e2", 100.0), ("1.0e-3", 0.001),
    ("1.5e3", 1500.0), ("0.1", 0.1), (".5", 0.5), ("1000", 1000), ("1_000", 1000), ("true", True), ("null", None),
    ("1e-3x", "1e-3x"), ("e5", "e5"), ("[1e-3, 2]", [0.001, 2]),
])
def test_yaml_numbers(text, value):
    got = cli.parse_value("x", text)
    assert got == value and type(got) is type(value)


def test_pyyaml_alone_reads_1e3_as_text():
    assert yaml.safe_load("1e-3") == "1e-3", "if PyYAML ever changes, ConfigLoader can go"


def test_config_file_numbers(tmp_path):
    cfg = tmp_path / "01_x.yaml"
    cfg.write_text("lr: 1e-3    # a comment\nextra: {a: 5e-4}\nseeds: [0, 1]\n")
    loaded = cli.load_config(str(cfg))
    assert loaded == {"lr": 0.001, "extra": {"a": 0.0005}, "seeds": [0, 1]} and type(loaded["lr"]) is float


@pytest.mark.parametrize("text,message", [
    ("- 1\n- 2\n", "expected a YAML mapping of parameter: value, got list"),
    ("just text\n", "expected a YAML mapping of parameter: value, got str"),
    ("lr: [1, 2\n", "not valid YAML"),
    ("1: 2\n", "parameter names must be text"),
])
def test_config_file_that_is_not_a_mapping(capsys, no_kernel, tmp_path, text, message):
    cfg = tmp_path / "params.yaml"
    cfg.write_text(text)
    err = usage_error(capsys, FIXTURE, "-f", cfg)
    assert f"{cfg}: " in err and message in err


def test_missing_config_file(capsys, no_kernel, tmp_path):
    assert "no such config file" in usage_error(capsys, FIXTURE, "-f", tmp_path / "nope.yaml")


def test_every_shipped_config_fits_its_notebook():
    for cfg in sorted((ROOT / "configs").glob("*.yaml")):
        args = cli.build_parser()[0].parse_args(["run", "-f", str(cfg)])
        names, given = cli.gather_parameters(args)
        cli.plan_parameters(cli.find_notebooks(names), given)   # raises CLIError on a mismatch


def test_every_gpu_jobs_file_line_fits_its_notebook(monkeypatch):
    """configs/gpu/*.txt (scripts/gpu_lease.sh run): a typo would only show on a leased GPU, minutes in.

    Each job's arguments must pass the CLI's checks and write into a results folder of its own stream
    (/tmp/res/<stream>/...): the streams run at once, and two writing one table at the same time would lose
    rows; a stream's jobs run one after another, and the tables they share merge their rows (notebooks 02 and
    04, notebook 03's table10 and tables2_3)."""
    import shlex

    monkeypatch.chdir(ROOT)   # gpu_lease.sh runs the jobs from the repository root
    files = sorted((ROOT / "configs" / "gpu").glob("*.txt"))
    assert files
    for f in files:
        for line in f.read_text().splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            stream, name, *argv = shlex.split(line)
            if argv[0].startswith("scripts/"):   # a script job: the script exists and its folders are its stream's
                assert (ROOT / argv[0]).is_file(), (f.name, name, argv[0])
                flags = dict(zip(argv, argv[1:]))
                assert flags.get("--results-dir", "").startswith(f"/tmp/res/{stream}/"), (f.name, name)
                assert flags.get("--out-root", "").startswith(f"/tmp/runs/{stream}"), (f.name, name)
                continue
            args = cli.build_parser()[0].parse_args(["run", *argv])
            names, given = cli.gather_parameters(args)
            cli.plan_parameters(cli.find_notebooks(names), given)   # raises CLIError on a mismatch
            assert "results_dir" in given and given["results_dir"][1] == "-p results_dir", (f.name, name)
            folder = str(given["results_dir"][0])
            assert folder.startswith(f"/tmp/res/{stream}/"), (f.name, name, folder)


# ---- running the fixture -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    """Run the fixture once: lr from a config file written as 1e-3, maybe from -p as 5e-4."""
    tmp = tmp_path_factory.mktemp("cli")
    cfg = tmp / "params.yaml"
    cfg.write_text("lr: 1e-3\nlabel: from-config\nrounds: 7\n")
    mp = pytest.MonkeyPatch()
    for name in ("FLTUTOR_HEADLESS", "PYTHONPATH"):
        mp.setenv(name, os.environ.get(name, ""))
    try:
        code = cli.main(["run", str(FIXTURE), "-f", str(cfg), "-p", "maybe", "5e-4", "-p", "rounds", "4",
                         "--out", str(tmp), "--no-progress"])
    finally:
        mp.undo()
    return code, json.loads((tmp / "cli_params" / "results.json").read_text())


def test_1e3_reaches_the_notebook_as_a_float(executed):
    code, res = executed
    assert code == 0 and res["diverged"] == []
    assert res["seen"]["maybe"] == [0.0005, "float"], "-p maybe 5e-4"
    assert res["seen"]["lr"] == [0.001, "float"], "lr: 1e-3 in the config file"
    assert res["seen"]["rounds"] == [4, "int"], "-p overrides the config file"
    assert res["seen"]["label"] == ["from-config", "str"]


def test_diverged_run_is_reported_and_sets_exit_status(capsys, kernel_env, tmp_path):
    code = cli.main(["run", str(FIXTURE), "-p", "diverge_at", "3", "--out", str(tmp_path), "--no-progress"])
    out = capsys.readouterr().out
    assert code == cli.EXIT_DIVERGED == 3
    assert ("[fltutor] cli_params: fixture (seed=0, lr=0.1) diverged at round 3 (local training, client 3); "
            "lower lr") in out.splitlines()
    row = next(line for line in out.splitlines() if "fixture accuracy" in line)
    assert "diverged at round 3" in row and "60.00" in row
    assert out.index("=== fltutor summary ===") < out.index("diverged at round 3 (local"), "after the summary"


def test_results_without_a_diverged_key_report_nothing(tmp_path):
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"summary": []}))
    assert cli.divergence_lines({"04_x": path}) == []


def test_fresh_removes_only_the_cached_cells_and_checkpoints(tmp_path, capsys):
    from fltutor.__main__ import NOTEBOOKS, build_parser, start_fresh
    for sub in ("cells/a", "sweeps/b", "federations/c", "keep"):
        (tmp_path / sub).mkdir(parents=True)
    (tmp_path / "notes.txt").write_text("mine")
    start_fresh(NOTEBOOKS / "01_fedavg_and_baselines.ipynb", {"run_root": str(tmp_path)})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep", "notes.txt"]
    assert "--fresh: removing" in capsys.readouterr().out
    assert build_parser()[0].parse_args(["run", "01", "--fresh"]).fresh


def test_a_missing_nbconvert_skips_the_html_page_and_says_so(tmp_path, monkeypatch, capsys):
    # a GPU box with papermill alone ran every notebook to the end, then failed on the page (exit 1)
    nb = tmp_path / "01_x.ipynb"
    nb.write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    monkeypatch.setitem(sys.modules, "nbconvert", None)          # import nbconvert -> ImportError
    assert cli.write_html(nb) is None
    assert not nb.with_suffix(".html").exists()
    assert "nbconvert is not installed" in capsys.readouterr().err
