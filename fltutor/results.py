"""Full-scale results as files a reader can trust: a tidy CSV per table and a JSON of how it was made.

``results/<paper>/<table>.csv`` holds one row per run and metric (columns: whatever identifies the
run, e.g. dataset, method, seed, then ``metric`` and ``value``); ``<table>.json`` beside it holds
the provenance: the command, fltutor's version, the git commit (and whether the tree was dirty),
the device, the date and the wall time. Both are written atomically. The README, the notebooks'
closing tables and the CLI summary read them with ``read_table`` and ``summarize``.
"""
from __future__ import annotations

import csv
import io
import math
import os
import platform
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence

import numpy as np

from . import __version__
from .checkpoint import REUSED, atomic_write_json, atomic_write_text

__all__ = ["provenance", "write_table", "merge_rows", "merge_folder", "read_table", "summarize", "paired_difference", "provenance_comments", "keep_parts", "devices", "momentum_of", "algorithm_name", "load_script",
           "RESULTS_DIR",
           "selfcheck_enabled", "folder_from_cli", "table_from_cli",
           "check_notebook_results"]

RESULTS_DIR = Path(__file__).resolve().parent.parent / "results"
PAPERS = ("gma", "privacy", "waffle_ibp", "waffle_weighted")   # the folders of results/, one per paper or audit


def _git(*args: str, cwd=None) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=cwd or Path(__file__).resolve().parent, capture_output=True,
                             text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def code_dirty(cwd=None) -> bool | None:
    """Do tracked files other than the results/ tables differ from the commit? (None outside git.)

    A run that merges its rows into results/ leaves those tables modified, and the next run in the same
    checkout would otherwise record its unchanged code as dirty."""
    status = _git("status", "--porcelain", "--untracked-files=no", "--", ":(top)", ":(top,exclude)results", cwd=cwd)
    return None if status is None else bool(status)


def device_name(device=None) -> str:
    """The device in words: the GPU's name, or the CPU's architecture and core count."""
    import torch
    dev = torch.device("cuda" if device is None and torch.cuda.is_available() else device or "cpu")
    if dev.type == "cuda":
        return f"cuda: {torch.cuda.get_device_name(dev)}"
    return f"cpu: {platform.machine()} x{os.cpu_count()} ({platform.system()})"


def provenance(*, command: str | None = None, wall_s: float | None = None, device=None, **extra) -> dict:
    """How a table was made: command, version, commit (+ dirty: code_dirty), device, UTC date, wall time, and ``extra``.

    Where this process resumed runs from checkpoints or reloaded finished cells (``checkpoint.REUSED``), a
    ``reused`` entry says so: its wall time then leaves out what earlier processes trained."""
    meta = {"command": command if command is not None else " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
            "fltutor_version": __version__, "commit": _git("rev-parse", "HEAD") or "unknown",
            "dirty": code_dirty(), "device": device_name(device),
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "wall_s": None if wall_s is None else round(float(wall_s), 1)}
    if any(REUSED.values()):
        meta["reused"] = {**REUSED, "note": "wall_s counts this process only; earlier processes trained the "
                                            "resumed rounds and the reloaded cells"}
    return {**meta, **extra}


def _check_rows(rows: Sequence[dict]) -> list[str]:
    if not rows:
        raise ValueError("rows: a table needs at least one row")
    cols = list(rows[0])
    for need in ("metric", "value"):
        if need not in cols:
            raise ValueError(f"rows: every row needs a {need!r} column (tidy: one row per run and metric); "
                             f"got columns {cols}")
    for i, r in enumerate(rows):
        if list(r) != cols:
            raise ValueError(f"rows: row {i} has columns {list(r)}, the first row {cols}; give every row the same "
                             "columns in the same order")
    return cols


def merge_rows(old: Sequence[dict], new: Sequence[dict]) -> list[dict]:
    """``old`` rows that no ``new`` row replaces, then ``new``; a row is identified by every column but ``value``.

    Columns are the union (old ones first); a row missing a column gets None there. So a table can grow
    over several commands (one dataset now, another on a GPU later) and a rerun replaces its own rows."""
    cols = list(dict.fromkeys([k for r in [*old[:1], *new[:1]] for k in r]))
    cols = [c for c in cols if c not in ("metric", "value")] + ["metric", "value"]

    def ident(r):
        return tuple(("" if r.get(c) is None else str(r.get(c))) for c in cols if c != "value")

    fresh = {ident(r) for r in new}
    return [{c: r.get(c) for c in cols} for r in [*(r for r in old if ident(r) not in fresh), *new]]


def write_table(folder, name: str, rows: Sequence[dict], meta: dict, *, merge: bool = False) -> tuple[Path, Path]:
    """Write ``<folder>/<name>.csv`` (tidy rows) and ``<name>.json`` (``meta``, see ``provenance``) atomically.

    ``merge=True`` keeps the rows already in the table that ``rows`` does not replace (``merge_rows``), and
    the JSON lists every command that contributed under ``parts`` (the newest also at the top level)."""
    _check_rows(rows)
    folder = Path(folder)
    if merge:
        got = read_table(folder, name)
        if got is not None:
            old_rows, old_meta = got
            rows = merge_rows(old_rows, rows)
            parts = old_meta.get("parts") or [{k: v for k, v in old_meta.items() if k not in ("rows", "columns", "table")}]
            meta = {**meta, "parts": [*parts, dict(meta)]}
        else:
            meta = {**meta, "parts": [dict(meta)]}
    cols = _check_rows(rows)
    folder.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: "" if v is None or (isinstance(v, float) and math.isnan(v)) else v for k, v in r.items()})
    path = folder / f"{name}.csv"
    atomic_write_text(path, buf.getvalue())
    meta_path = folder / f"{name}.json"
    atomic_write_json(meta_path, {**meta, "table": f"{name}.csv", "rows": len(rows), "columns": cols})
    return path, meta_path


def _value(text: str):
    if text == "":
        return None
    try:
        v = float(text)
    except ValueError:
        return text
    return int(v) if v.is_integer() and "." not in text and "e" not in text.lower() else v


def read_table(folder, name: str) -> tuple[list[dict], dict] | None:
    """(rows, meta) of a table written by ``write_table``, or None if it does not exist yet."""
    import json
    folder = Path(folder)
    path, meta_path = folder / f"{name}.csv", folder / f"{name}.json"
    if not path.exists():
        return None
    with open(path, newline="") as f:
        rows = [{k: _value(v) for k, v in r.items()} for r in csv.DictReader(f)]
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    return rows, meta


def summarize(rows: Sequence[dict], by: Sequence[str], metric: str | None = None) -> dict[tuple, dict]:
    """Mean, sample standard deviation and count of ``value`` per group of ``by``.

    Missing values (a run that diverged writes none) are not averaged: ``missing`` counts them, so a
    reader can print "diverged in 1 of 4 seeds" instead of a mean over the seeds that survived.

    Rows with a ``seed`` must give each seed once per group: two rows of one seed (say from two runs
    labelled differently, merged into one table) would count it twice, so that raises a ValueError."""
    groups: dict[tuple, list[float]] = {}
    missing: dict[tuple, int] = {}
    seen: set[tuple] = set()
    for r in rows:
        if metric is not None and r["metric"] != metric:
            continue
        key = tuple(r[k] for k in by)
        if r.get("seed") is not None:
            once = (key, r.get("metric"), r["seed"])
            if once in seen:
                raise ValueError(f"seed {r['seed']} appears twice in the group {dict(zip(by, key))} "
                                 f"(metric {r.get('metric')!r}): tell the runs apart by a column in `by`, "
                                 "or drop the stale row from the table")
            seen.add(once)
        groups.setdefault(key, [])
        missing.setdefault(key, 0)
        if r["value"] is not None and not isinstance(r["value"], str):
            groups[key].append(float(r["value"]))
        else:
            missing[key] += 1
    out = {}
    for key, vals in groups.items():
        a = np.asarray(vals, dtype=float)
        out[key] = {"mean": float(a.mean()) if len(a) else None,
                    "sd": float(a.std(ddof=1)) if len(a) > 1 else None, "n": len(a), "missing": missing[key]}
    return out


def paired_difference(rows: Sequence[dict], by: Sequence[str], column: str, first, second,
                      metric: str) -> dict[tuple, dict]:
    """Mean, sample sd, count, smallest and largest of ``first`` minus ``second`` (two values of ``column``,
    say two methods), seed by seed, per group of ``by``: the spread of a lead, not of two separate means.

    Only seeds where both have a value count; ``missing`` counts the seeds where either one is absent
    or diverged (no value), so a lead is never computed over a survivor's seeds alone unnoticed."""
    vals: dict[tuple, dict] = {}
    for r in rows:
        if r["metric"] != metric or r[column] not in (first, second):
            continue
        v = r["value"]
        v = float(v) if v is not None and not isinstance(v, str) else None
        vals.setdefault(tuple(r[k] for k in by), {}).setdefault(r["seed"], {})[r[column]] = v
    out = {}
    for key, seeds in vals.items():
        d = [s[first] - s[second] for s in seeds.values() if s.get(first) is not None and s.get(second) is not None]
        a = np.asarray(d, dtype=float)
        out[key] = {"mean": float(a.mean()) if len(a) else None, "sd": float(a.std(ddof=1)) if len(a) > 1 else None,
                    "n": len(a), "missing": len(seeds) - len(a),
                    "min": float(a.min()) if len(a) else None, "max": float(a.max()) if len(a) else None}
    return out


def momentum_of(r: dict) -> float:
    """A row's client momentum; rows written before the column existed ran at the paper's 0.9."""
    return 0.9 if r.get("momentum") is None else r["momentum"]


def algorithm_name(algorithm: str, meta: dict) -> str:
    """FedAvg, FedProx (μ = 0.01), FedAdam, FedYogi: FedProx names the μ its commands ran (from the JSON's settings,
    since the rows have no μ column), or says the commands disagree."""
    name = {"fedavg": "FedAvg", "fedprox": "FedProx", "fedadam": "FedAdam", "fedyogi": "FedYogi",
            "scaffold": "SCAFFOLD"}.get(algorithm, algorithm)
    if algorithm != "fedprox":
        return name
    mus = {(p.get("settings") or {}).get("mu") for p in meta.get("parts") or [meta]
           if algorithm in ((p.get("settings") or {}).get("algorithms") or [])}
    return f"{name} (μ = {mus.pop():g})" if len(mus) == 1 and None not in mus else f"{name} (μ: see the JSON)"


def devices(meta: dict) -> str:
    """Every device that wrote a table, with how many of its commands ran there: a table grown on a CPU and
    then a GPU names both, not just the device of the last command."""
    from collections import Counter
    n = Counter(str(m.get("device")) for m in meta.get("parts") or [meta])
    return "; ".join(d if len(n) == 1 else f"{d} ({k} command{'s' * (k > 1)})" for d, k in n.items())


def scales(meta: dict) -> str:
    """Every scale a table's commands recorded, with how many commands each: a table of reduced-scale probes and
    full-scale runs names both, not just the scale of the last command (as ``devices``)."""
    from collections import Counter
    n = Counter(str(m.get("scale") or "scale unrecorded") for m in meta.get("parts") or [meta])
    return "; ".join(s if len(n) == 1 else f"{s} ({k} command{'s' * (k > 1)})" for s, k in n.items())


def command_lines(meta: dict, path: str, most: int | None = None) -> list[str]:
    """One line per command that wrote the table at ``path`` (as shown to a reader): its command, device, date,
    commit, wall time, scale (and note, if it has one), so rows made by several commands are never shown with the
    newest one's alone. ``most``: a table written by more commands than that gets three lines instead: how many,
    on which devices and at which scales (``devices``, ``scales``), from which date to which, and where the full
    list is (the JSON's ``parts``), so a notebook does not open on a wall of command lines."""
    parts = meta.get("parts") or [meta]
    if most is not None and len(parts) > most:
        dates = sorted(str(p.get("date") or "")[:10] for p in parts)
        json_path = path[:-4] + ".json" if path.endswith(".csv") else path
        return [f"{path}: {len(parts)} commands, {dates[0]} to {dates[-1]}, each listed with its device, commit and "
                f"wall time under `parts` in {json_path}",
                f"  devices: {devices(meta)}", f"  scales: {scales(meta)}"]
    return [f"{path}: {p.get('command')} | {p.get('device')} | {p.get('date')} | commit {str(p.get('commit'))[:10]} | "
            f"{p.get('wall_s')} s | {p.get('scale', '')}" + (f" | {p['note']}" if p.get("note") else "") for p in parts]


def keep_parts(meta: dict, keep) -> dict:
    """``meta`` with only the commands (``parts``) for which ``keep(part)`` is true: the provenance of the slice of
    a table that a printer shows (one grid, one dataset), so its comments name no other command."""
    return {**meta, "parts": [p for p in meta.get("parts") or [meta] if keep(p)]}


def provenance_comments(meta: dict) -> list[str]:
    """One markdown comment per command that wrote a table (each of ``parts`` when several did): what the
    README keeps beside a table so a reader sees how, where, when and at what scale it was made. Parts that ran
    the same command at the same scale, on the same device and commit (one job merged after each of its values,
    or resumed) share one line: their first and last date, how many they were and their summed wall time."""
    groups: dict[tuple, list[dict]] = {}
    for m in meta["parts"] if "parts" in meta else [meta]:   # keep_parts may leave none: then nothing is named
        key = (m.get("command"), m.get("scale", ""), m.get("device"), str(m.get("commit"))[:10])
        groups.setdefault(key, []).append(m)
    lines = []
    for (command, scale, device, commit), ms in groups.items():
        dates = sorted(str(m.get("date")) for m in ms)
        walls = [m.get("wall_s") for m in ms]
        wall = None if None in walls else round(sum(walls), 1)
        reused = {k: sum((m.get("reused") or {}).get(k) or 0 for m in ms)
                  for k in ("resumed_runs", "rounds_resumed", "reloaded_cells")}
        when = dates[0] if len(ms) == 1 else f"{dates[0]} to {dates[-1]} ({len(ms)} parts)"
        lines.append(f"<!-- {command} | {scale} | {device} | {when} | commit {commit} | "
                     f"{wall} s{' in all' if len(ms) > 1 else ''}{_reused_words(reused, len(ms))} -->")
    return lines


def _reused_words(reused: dict | None, processes: int = 1) -> str:
    """' of this process (N runs resumed, ...)' for a command whose wall time leaves out earlier processes' work, else ''."""
    if not reused:
        return ""
    parts = [f"{reused[k]} {what}" for k, what in (("resumed_runs", "runs resumed"),
                                                  ("rounds_resumed", "rounds done before"),
                                                  ("reloaded_cells", "finished cells reloaded")) if reused.get(k)]
    if not parts:
        return ""
    return f" of {'this process' if processes == 1 else 'these processes'} ({', '.join(parts)})"


def load_script(name: str):
    """scripts/<name>.py of this checkout as a module (the scripts are files, not a package), for a notebook or
    another script that shows a table the way that script prints it."""
    import importlib.util
    path = RESULTS_DIR.parent / "scripts" / f"{name}.py"
    if not path.exists():
        raise FileNotFoundError(f"load_script: no {path}; name one of scripts/*.py without .py")
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def folder_from_cli(description: str, paper: str) -> Path:
    """The ``--folder`` a scripts/*_table.py was given (default results/<paper>)."""
    import argparse
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--folder", default=str(RESULTS_DIR / paper))
    return Path(ap.parse_args().folder)


def table_from_cli(description: str, paper: str, name: str, missing_hint: str) -> tuple[list[dict], dict]:
    """What a scripts/*_table.py does first: take ``--folder`` (default results/<paper>) and read table ``name``,
    or exit with a message that says which config writes it."""
    folder = folder_from_cli(description, paper)
    got = read_table(folder, name)
    if got is None:
        raise SystemExit(f"no {folder}/{name}.csv yet: {missing_hint}")
    return got


# ---- bringing tables made elsewhere home ----------------------------------------------------------
_TABLE_KEYS = ("rows", "columns", "table", "parts")


def _plain(v):
    """Tuples as lists, recursively (a JSON round trip's view of a setting)."""
    return [_plain(x) for x in v] if isinstance(v, (list, tuple)) else v


def _parts(meta: dict) -> list[dict]:
    """The commands that wrote a table: ``parts``, or the table's own provenance for one written in one go."""
    return [dict(p) for p in meta.get("parts") or ([{k: v for k, v in meta.items() if k not in _TABLE_KEYS}] if meta else [])]


def scale_label(meta: dict, *, holds: dict | None = None, **settings) -> str:
    """The scale of one group of rows in a table that several commands wrote ("full scale", "reduced scale",
    "quick run"): the ``scale`` of the newest command among ``meta``'s parts whose recorded ``settings``
    hold every value given (e.g. ``grid_rounds=100``), up to its colon. A 15-round CPU grid and a 100-round
    GPU grid in one table so each keep their own label. ``holds``: recorded settings that are lists and must
    contain the given item, e.g. ``holds={"algorithms": "fedprox", "settings": ["mnist", "label", 500]}`` for
    notebook 03's Tables 2-3, where each command ran some rows and algorithms. 'scale unrecorded' when no
    command matches, never another group's label."""
    def matches(p):
        rec = p.get("settings") or {}
        return (all(rec.get(k) == v for k, v in settings.items())
                and all(isinstance(rec.get(k), list) and _plain(v) in _plain(rec[k]) for k, v in (holds or {}).items()))
    match = [p for p in _parts(meta) if matches(p)]
    if not match:
        return "scale unrecorded"
    newest = max(match, key=lambda p: str(p.get("date") or ""))
    return str(newest.get("scale") or "full scale").split(":")[0]


def summarize_by_scale(rows: Sequence[dict], meta: dict, by: Sequence[str], metric: str, *,
                       rounds_setting: str = "rounds", holds=None, equal=None) -> list[tuple[dict, dict, str]]:
    """``summarize`` over ``by`` and the rows' ``rounds``, each group with the scale label (``scale_label``) of
    the command whose settings[``rounds_setting``] made it: a table holding one grid at the paper's rounds and
    a CPU-sized one at fewer never pools their seeds under one label. ``holds``: a function of a group (a dict)
    giving ``scale_label``'s ``holds``, so each group takes the label of a command that ran it; ``equal``: a
    function of a group giving more settings the command must have recorded with exactly those values (e.g.
    ``{"select_lr": False}`` for a row at a fixed learning-rate pair, which a grid-selecting command did not make).
    [(group as a dict, its stats, label)]."""
    keys = [*by, "rounds"]
    return [(k, st, scale_label(meta, holds=holds(k) if holds else None, **(equal(k) if equal else {}),
                                **{rounds_setting: k["rounds"]}))
            for key, st in sorted(summarize(rows, keys, metric).items(), key=lambda kv: str(kv[0]))
            for k in [dict(zip(keys, key))]]


def merge_folder(src, dst, *, replace: bool = False, dry_run: bool = False, tables=None) -> list[dict]:
    """Merge every table of the results folder ``src`` into ``dst`` and say what changed, one dict per table.

    For tables made in another checkout or on another machine (a git worktree running a long protocol,
    a GPU box): ``src/<name>.csv`` rows that ``dst`` lacks are added and ``dst/<name>.json`` lists
    ``src``'s commands under ``parts`` (the newest at the top level), so every row keeps its provenance.
    Rows already in ``dst`` with the same value change nothing, so merging a copy of ``dst`` that grew
    is safe and merging twice is a no-op. A row whose identity (every column but ``value``) is in ``dst``
    with another value is a conflict: nothing is written and ValueError names it, unless ``replace``
    (then ``src``'s value wins, as a rerun replaces its own rows). New rows from a table whose JSON
    names no command that ``dst`` lacks are refused: they would have no provenance. ``tables``: merge only
    these table names (each must be in ``src``), e.g. when another table of ``src`` is older than ``dst``'s."""
    src, dst = Path(src), Path(dst)
    if not src.is_dir():
        raise ValueError(f"merge: source {str(src)!r} is not a folder; give a results folder such as "
                         f"/path/to/checkout/results/waffle_weighted")
    if dst.exists() and src.resolve() == dst.resolve():
        raise ValueError(f"merge: source and destination are the same folder ({src})")
    names = sorted(p.stem for p in src.glob("*.csv"))
    if not names:
        raise ValueError(f"merge: no tables (*.csv) in {src}")
    if tables is not None:
        missing = sorted(set(tables) - set(names))
        if missing:
            raise ValueError(f"merge: tables={missing} not in {src}; it holds {names}")
        names = [n for n in names if n in set(tables)]
    plans = []
    for name in names:
        s_rows, s_meta = read_table(src, name)
        if not s_meta:
            raise ValueError(f"merge: {src / name}.csv has no {name}.json beside it, so its rows have no provenance")
        got = read_table(dst, name)
        d_rows, d_meta = got if got is not None else ([], {})
        cols = list(dict.fromkeys([k for r in [*d_rows, *s_rows] for k in r]))
        key = lambda r, skip=(): tuple("" if r.get(c) is None else str(r.get(c)) for c in cols if c not in skip)
        have_full = {key(r) for r in d_rows}
        have_value = {key(r, ("value",)): r.get("value") for r in d_rows}
        new = [r for r in s_rows if key(r) not in have_full]
        clash = [r for r in new if key(r, ("value",)) in have_value]
        d_parts, s_parts = _parts(d_meta), _parts(s_meta)
        seen = {(p.get("command"), p.get("date")) for p in d_parts}
        new_parts = [p for p in s_parts if (p.get("command"), p.get("date")) not in seen]
        if clash and not replace:
            r = clash[0]
            what = ", ".join(f"{c}={r.get(c)}" for c in cols if c != "value" and r.get(c) not in (None, ""))
            raise ValueError(f"merge: {len(clash)} row(s) of {src / name}.csv give another value than {dst / name}.csv, "
                             f"first {what}: {r.get('value')} here, {have_value[key(r, ('value',))]} there; nothing was "
                             f"written. Pass replace=True (--replace) to keep the source's values")
        if new and not new_parts:
            raise ValueError(f"merge: {src / name}.csv has {len(new)} row(s) that {dst / name}.csv lacks, but "
                             f"{name}.json names no command that {dst} does not already list")
        plans.append((name, d_rows, new, d_parts, new_parts,
                      {"table": name, "added": len(new) - len(clash), "replaced": len(clash),
                       "new_parts": [p.get("command") for p in new_parts], "created": got is None}))
    if not dry_run:   # every table was checked before the first write
        for name, d_rows, new, d_parts, new_parts, _ in plans:
            if new or new_parts:
                parts = d_parts + new_parts
                latest = max(parts, key=lambda p: str(p.get("date") or ""))
                write_table(dst, name, merge_rows(d_rows, new), {**latest, "parts": parts})
    return [report for *_, report in plans]


# ---- the self-check every notebook ends with -----------------------------------------------------
def selfcheck_enabled() -> bool:
    """True under ``pytest --nbval-lax`` (notebooks/conftest.py sets FLTUTOR_SELFCHECK=1): the notebook runs
    its quick defaults on the bundled data, so checks that hold only there may fail the build."""
    return os.environ.get("FLTUTOR_SELFCHECK") == "1"


def check_notebook_results(path, *, known_divergences: Sequence[str] = ()) -> dict:
    """Check a notebook's results.json and return it; raise AssertionError naming what is wrong.

    Always: the file exists and its summary has rows with what / ours / paper. Under the self-check
    (``selfcheck_enabled``), no run diverged other than ``known_divergences``: a sweep with other
    settings may diverge (it is reported, exit status 3), the quick defaults may not."""
    import json
    path = Path(path)
    if not path.exists():
        raise AssertionError(f"{path} was not written")
    res = json.loads(path.read_text())
    rows = res.get("summary") or []
    bad = [r for r in rows if not {"what", "ours", "paper"} <= set(r)]
    if not rows or bad:
        raise AssertionError(f"{path}: the summary needs rows with what, ours and paper; got {len(rows)} rows, "
                             f"{len(bad)} incomplete (first: {bad[:1]})")
    if selfcheck_enabled():
        new = sorted({d.get("what", "?") for d in res.get("diverged") or []} - set(known_divergences))
        if new:
            raise AssertionError(f"{path}: the quick defaults never lost these runs before, now they diverged: {new}")
    print(f"self-check passed: {path.name}, {len(rows)} summary rows"
          + (", divergences as known" if selfcheck_enabled() else ""))
    return res
