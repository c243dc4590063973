"""scripts/cpu_jobs.sh: which commands a jobs file becomes (DRY=1), and its errors on bad input."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fltutor import results

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "cpu_jobs.sh"
JOBS = """# a comment line
s4 a -f configs/03_table10.yaml -p lr_grid '{"lr": [0.001]}' -p results_dir /tmp/res/s4/gma
s7 b -f configs/03_table10.yaml -p momentum 0 -p results_dir /tmp/res/s7/gma

s4 c -f configs/04_fig5.yaml -p seeds '[1]' -p results_dir /tmp/res/s4/waffle_weighted
"""


def _run(tmp_path, *args, **env):
    e = {**os.environ, "CPU_JOBS_DIR": str(tmp_path / "bg"), "DRY": "1", **env}
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, env=e, timeout=60)


def test_each_job_gets_its_own_results_checkpoints_and_output_folders(tmp_path):
    (tmp_path / "jobs.txt").write_text(JOBS)
    proc = _run(tmp_path, "start", "t1", str(tmp_path / "jobs.txt"))
    assert proc.returncode == 0, proc.stderr
    bg = tmp_path / "bg" / "t1"
    cmds = [line for line in proc.stdout.splitlines() if line.startswith("python -m fltutor run")]
    assert cmds == [   # stream s4's two jobs in file order, then s7's; /tmp/res/STREAM/ becomes the job's own folder
        f"python -m fltutor run -f configs/03_table10.yaml -p lr_grid '{{\"lr\": [0.001]}}' -p results_dir "
        f"{bg}/res/a/gma -p run_root {bg}/runs/a --out {bg}/nb/a --no-progress",
        f"python -m fltutor run -f configs/04_fig5.yaml -p seeds '[1]' -p results_dir {bg}/res/c/waffle_weighted "
        f"-p run_root {bg}/runs/c --out {bg}/nb/c --no-progress",
        f"python -m fltutor run -f configs/03_table10.yaml -p momentum 0 -p results_dir {bg}/res/b/gma "
        f"-p run_root {bg}/runs/b --out {bg}/nb/b --no-progress"]


def test_a_script_job_gets_its_own_folders_through_its_own_flags(tmp_path):
    (tmp_path / "jobs.txt").write_text("s5 abl scripts/gma_ablations.py --tables clients --out-root /tmp/runs/s5 "
                                       "--results-dir /tmp/res/s5/gma --no-progress\n")
    proc = _run(tmp_path, "start", "t6", str(tmp_path / "jobs.txt"))
    assert proc.returncode == 0, proc.stderr
    bg = tmp_path / "bg" / "t6"
    assert [line for line in proc.stdout.splitlines() if line.startswith("python ")] == [
        f"python scripts/gma_ablations.py --tables clients --out-root {bg}/runs/abl --results-dir {bg}/res/abl/gma "
        "--no-progress"]


def test_a_finished_job_is_skipped_and_streams_can_be_picked(tmp_path):
    (tmp_path / "jobs.txt").write_text(JOBS)
    (tmp_path / "bg" / "t2").mkdir(parents=True)
    (tmp_path / "bg" / "t2" / "done").write_text("a\n")
    proc = _run(tmp_path, "start", "t2", str(tmp_path / "jobs.txt"), STREAMS="s4")
    assert proc.returncode == 0, proc.stderr
    assert "[s4] a finished earlier" in proc.stdout
    runs = [line.split("run_root ")[1].split()[0] for line in proc.stdout.splitlines() if "run_root" in line]
    assert [Path(r).name for r in runs] == ["c"]   # not a (done), not b (stream s7)


def test_a_later_start_without_a_jobs_file_reuses_the_saved_list(tmp_path):
    (tmp_path / "jobs.txt").write_text(JOBS)
    first = _run(tmp_path, "start", "t5", str(tmp_path / "jobs.txt"))
    (tmp_path / "jobs.txt").unlink()   # e.g. a file in /tmp, gone in the next session
    again = _run(tmp_path, "start", "t5")
    assert again.returncode == 0, again.stderr
    assert again.stdout == ("restarting the streams t5 ran before: s4 s7 (STREAMS=\"...\" starts others of its list)\n"
                            + first.stdout)


def test_a_restart_runs_only_the_streams_the_tag_ran_before(tmp_path):
    (tmp_path / "jobs.txt").write_text(JOBS)
    assert _run(tmp_path, "start", "t8", str(tmp_path / "jobs.txt"), STREAMS="s7").returncode == 0
    again = _run(tmp_path, "start", "t8")   # a new session: not s4, which never ran under t8
    assert again.returncode == 0, again.stderr
    assert "restarting the streams t8 ran before: s7" in again.stdout
    assert [Path(line.split("run_root ")[1].split()[0]).name for line in again.stdout.splitlines()
            if "run_root" in line] == ["b"]
    both = _run(tmp_path, "start", "t8", str(tmp_path / "jobs.txt"))   # a jobs file given: its every stream
    assert sorted(Path(line.split("run_root ")[1].split()[0]).name for line in both.stdout.splitlines()
                  if "run_root" in line) == ["a", "b", "c"]
    assert (tmp_path / "bg" / "t8" / "streams").read_text() == "s7\ns4\n"


def test_add_appends_new_jobs_in_place_and_starts_the_idle_streams(tmp_path):
    (tmp_path / "jobs.txt").write_text(JOBS)
    assert _run(tmp_path, "start", "t7", str(tmp_path / "jobs.txt")).returncode == 0
    saved = tmp_path / "bg" / "t7" / "jobs.txt"
    inode = saved.stat().st_ino   # a running chain holds this file open: it must never be replaced
    (tmp_path / "more.txt").write_text("s4 a -f configs/03_table10.yaml -p results_dir /tmp/res/s4/gma\n"
                                       "s9 d scripts/gma_ablations.py --tables tau --out-root /tmp/runs/s9 "
                                       "--results-dir /tmp/res/s9/gma")   # no newline at the end
    proc = _run(tmp_path, "add", "t7", str(tmp_path / "more.txt"))
    assert proc.returncode == 0, proc.stderr
    assert "job a is in t7's list already: not added" in proc.stdout and "added 1 job(s) to t7" in proc.stdout
    assert saved.stat().st_ino == inode and saved.read_text() == JOBS + (tmp_path / "more.txt").read_text().split("\n")[1] + "\n"
    bg = tmp_path / "bg" / "t7"   # stream s9 was idle (never started): it starts, with only its own job
    assert [line for line in proc.stdout.splitlines() if line.startswith("python ")] == [
        f"python scripts/gma_ablations.py --tables tau --out-root {bg}/runs/d --results-dir {bg}/res/d/gma"]
    assert _run(tmp_path, "start", "t7").returncode == 0 and saved.stat().st_ino == inode   # a restart keeps it too


@pytest.mark.parametrize("args, message", [
    (["start", "a b", "x"], "TAG: 'a b' must be letters"),
    (["start", "t3", "/nonexistent/jobs.txt"], "JOBS_FILE: no file"),
    (["start", "never-started"], "give one the first time TAG starts"),
    (["status", "never-started"], "TAG: no "),
    (["launch", "t3"], "usage:"),
    (["add", "never-started", "/dev/null"], "never started): use start"),
    (["add", "t3"], "usage:"),
    (["merge", "never-started"], "TAG: no "),
    (["merge"], "usage:"),
])
def test_bad_input_is_named(tmp_path, args, message):
    proc = _run(tmp_path, *args)
    assert proc.returncode == 2 and message in proc.stderr


def test_a_jobs_file_without_jobs_is_refused(tmp_path):
    (tmp_path / "jobs.txt").write_text("# only comments\n\n")
    proc = _run(tmp_path, "start", "t4", str(tmp_path / "jobs.txt"))
    assert proc.returncode == 2 and "has no job lines" in proc.stderr


def _finished(tmp_path, tag, done, tables):
    """A TAG folder whose jobs `done` finished; tables: {(job, paper): rows} written as each job's results."""
    bg = tmp_path / "bg" / tag
    bg.mkdir(parents=True)
    (bg / "done").write_text("".join(f"{n}\n" for n in done))
    for (job, paper), rows in tables.items():
        results.write_table(bg / "res" / job / paper, "t", rows, results.provenance(command=job, scale="full scale"))
    return bg


def test_merge_takes_every_finished_job_with_tables_in_the_order_they_finished(tmp_path):
    rows = [{"seed": 0, "metric": "m", "value": 1.0}]
    bg = _finished(tmp_path, "t7", ["c", "a", "b", "a"], {("a", "gma"): rows, ("c", "waffle_weighted"): rows,
                                                        ("c", "gma"): rows})
    proc = _run(tmp_path, "merge", "t7", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert f"python -m fltutor merge {bg}/res/c/gma {bg}/res/c/waffle_weighted {bg}/res/a/gma --dry-run" in proc.stdout
    assert "/: b (nothing of theirs to merge)" in proc.stdout   # b finished without a table: named, left out


def test_merge_brings_the_rows_home(tmp_path):
    bg = _finished(tmp_path, "t8", ["a", "b"], {("a", "gma"): [{"seed": 0, "metric": "m", "value": 1.0}],
                                                ("b", "gma"): [{"seed": 1, "metric": "m", "value": 2.0}]})
    env = {"DRY": "", "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = _run(tmp_path, "merge", "t8", "--into", str(tmp_path / "results"), **env)
    assert proc.returncode == 0, proc.stderr
    rows, meta = results.read_table(tmp_path / "results" / "gma", "t")
    assert sorted((r["seed"], r["value"]) for r in rows) == [(0, 1.0), (1, 2.0)]
    assert [p["command"] for p in meta["parts"]] == ["a", "b"]
    assert "readme_results.py" in proc.stdout
    assert (bg / "done").read_text() == "a\nb\n"   # nothing of the TAG is changed


def test_merge_without_a_finished_job_says_so(tmp_path):
    (tmp_path / "bg" / "t9").mkdir(parents=True)
    proc = _run(tmp_path, "merge", "t9")
    assert proc.returncode == 2 and "has no finished job yet" in proc.stderr


CORES = os.cpu_count() or 1


@pytest.mark.parametrize("threads, ok", [(str(CORES), True), ("1", True), ("0", False), ("two", False),
                                         (str(CORES + 1), False)])
def test_threads_per_job_is_checked_before_anything_starts(tmp_path, threads, ok):
    (tmp_path / "jobs.txt").write_text(JOBS)
    # the limit is the machine's cores, whatever OMP_NUM_THREADS says (pytest's workers run with 1)
    proc = _run(tmp_path, "start", "t9", str(tmp_path / "jobs.txt"), THREADS=threads, OMP_NUM_THREADS="1")
    if ok:
        assert proc.returncode == 0 and f"runs on {threads} CPU thread(s)" in proc.stdout
    else:
        assert proc.returncode == 2 and f"THREADS: got '{threads}'" in proc.stderr
        assert not (tmp_path / "bg" / "t9" / "jobs.txt").exists()   # refused before the tag was set up
