"""Command line: ``python -m fltutor run [NOTEBOOK ...] [-p NAME VALUE ...] [-f CONFIG.yaml] [--out DIR]``.

Runs the numbered notebooks headless through papermill (kernel ``python3``, working
directory ``notebooks/``), each writing its executed copy and ``results.json`` under DIR,
then prints every notebook's summary rows: our numbers beside the paper's.

Before anything runs, every given parameter is checked against the notebook's parameters cell
(``papermill.inspect_notebook``): a name the notebook does not have, or a value that does not fit
the default's type, is an error (exit status 2) that names the parameter. Values are YAML, read so
that ``1e-3`` is a float (YAML 1.1 makes it a string). A notebook records the runs that diverged in
its results.json (``"diverged"``); the CLI prints one line for each and exits with status 3.
"""
from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
EXIT_DIVERGED = 3
SET_BY_CLI = ("out_dir",)


class CLIError(Exception):
    """A usage error: printed as one paragraph after the usage line, exit status 2, no traceback."""


# ---- YAML values ---------------------------------------------------------------------------------
class ConfigLoader(yaml.SafeLoader):
    """PyYAML's SafeLoader, except that 1e-3 and 5e-4 are floats (as in YAML 1.2), not strings."""


ConfigLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
                   |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
                   |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
                   |[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*
                   |[-+]?\.(?:inf|Inf|INF)
                   |\.(?:nan|NaN|NAN))$""", re.X),
    list("-+0123456789."))


def read_yaml(text: str, source: str):
    """Parse YAML with ConfigLoader; a syntax error becomes a CLIError naming ``source``."""
    try:
        return yaml.load(text, Loader=ConfigLoader)
    except yaml.YAMLError as err:
        raise CLIError(f"{source}: not valid YAML ({' '.join(str(err).split())})") from None


def parse_value(name: str, text: str):
    """One ``-p NAME VALUE``: '0.1' -> 0.1, '1e-3' -> 0.001, 'true' -> True, '[1, 2]' -> a list."""
    return read_yaml(text, f"-p {name} {text!r}")


def load_config(path: str) -> dict:
    """A flat YAML mapping of notebook parameters (the same file ``papermill -f`` takes)."""
    p = Path(path)
    if not p.exists():
        raise CLIError(f"{path}: no such config file")
    cfg = read_yaml(p.read_text(), path)
    cfg = {} if cfg is None else cfg
    if not isinstance(cfg, dict):
        raise CLIError(f"{path}: expected a YAML mapping of parameter: value, got {type(cfg).__name__}")
    bad = [k for k in cfg if not isinstance(k, str)]
    if bad:
        raise CLIError(f"{path}: parameter names must be text, got {bad}")
    return cfg


# ---- notebooks -----------------------------------------------------------------------------------
def find_notebooks(names: list[str]) -> list[Path]:
    """Resolve 'NN', 'NN_topic', a file name or a path to notebook files, in the given order."""
    all_nbs = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    if not names:
        return all_nbs
    out = []
    for name in names:
        p = Path(name)
        if p.suffix == ".ipynb" and p.exists():
            out.append(p.resolve())
            continue
        hits = [nb for nb in all_nbs if nb.stem == p.stem or nb.stem.startswith(p.stem + "_") or nb.stem[:2] == p.stem]
        if len(hits) != 1:
            raise CLIError(f"notebook {name!r} matches {[h.name for h in hits] or 'nothing'}; "
                           f"choose from {[nb.stem for nb in all_nbs]}")
        out.append(hits[0])
    return out


def notebook_title(nb: Path) -> str:
    """The notebook's one-line title: its first markdown heading without the '# NN ·' prefix."""
    try:
        cells = json.loads(nb.read_text())["cells"]
    except (OSError, ValueError, KeyError):
        return "(unreadable)"
    for cell in cells:
        if cell.get("cell_type") == "markdown":
            line = "".join(cell["source"]).strip().splitlines()[0] if "".join(cell["source"]).strip() else ""
            return re.sub(r"^#+\s*(\d\d\s*[·:.-]\s*)?", "", line).strip()
    return ""


def notebook_listing() -> str:
    """One line per numbered notebook: 'NN  name  title'."""
    return "\n".join(f"  {nb.stem:40s} {notebook_title(nb)}" for nb in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")))


def parameter_help(nb: Path) -> str:
    """A notebook's parameters with their types, defaults and comments (papermill's inspect data)."""
    params = notebook_parameters(nb)
    rows = [(n, p.get("inferred_type_name") or "", str(p.get("default")), p.get("help") or "")
            for n, p in params.items() if n not in SET_BY_CLI]
    w = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(("name", "type", "default"))]
    lines = [f"{nb.stem}: {notebook_title(nb)}", "parameters (set with -p NAME VALUE or a -f config):",
             f"  {'name':{w[0]}}  {'type':{w[1]}}  {'default':{w[2]}}  meaning"]
    more = continued_comments(nb)
    indent = " " * (w[0] + w[1] + w[2] + 8)
    for n, t, d, h in rows:
        lines.append(f"  {n:{w[0]}}  {t:{w[1]}}  {d:{w[2]}}  {h}")
        lines += [indent + c for c in more.get(n, [])]
    return "\n".join(lines)


def continued_comments(nb: Path) -> dict[str, list[str]]:
    """Comment-only lines that continue a parameter's comment on the lines below it (papermill keeps
    only the first line's)."""
    import nbformat

    cell = next((c for c in nbformat.read(nb, 4).cells if "parameters" in c.metadata.get("tags", [])), None)
    more: dict[str, list[str]] = {}
    name = None
    for line in (cell.source.splitlines() if cell is not None else []):
        m = re.match(r"([A-Za-z_]\w*)\s*[:=]", line)
        if m:
            name = m.group(1)
        elif line.strip().startswith("#") and line[:1].isspace() and name:
            more.setdefault(name, []).append(line.strip().lstrip("#").strip())
        else:
            name = None
    return more


def notebook_for_config(path: str) -> str:
    """configs/NN_*.yaml belongs to notebook NN."""
    stem = Path(path).stem
    if not stem[:2].isdigit():
        raise CLIError(f"{path}: cannot tell which notebook it is for; name it NN_something.yaml or "
                       "also name the notebook on the command line")
    return stem[:2]


def _papermill():
    """papermill, or a CLIError saying how to get it (the run command needs Jupyter's stack)."""
    # nbformat loads jsonschema, which imports rfc3987_syntax when it is installed (jupyter-events brings it);
    # that import builds a parser and took 1.8 s of every run here, for the "iri" string formats, which no
    # notebook schema uses. Marking it absent makes jsonschema skip those two checks and nothing else.
    sys.modules.setdefault("rfc3987_syntax", None)
    try:
        import papermill as pm
    except ImportError as err:
        raise CLIError(f"papermill cannot be imported ({err}) by {sys.executable}; install the notebook stack "
                       "with `pip install -r requirements.txt`, or activate the environment that has it") from None
    return pm


def notebook_parameters(nb: Path) -> dict[str, dict]:
    """The parameters cell's names, each with its inferred type name and default (papermill)."""
    return _papermill().inspect_notebook(str(nb))


# ---- checking parameters -------------------------------------------------------------------------
def declared_type(type_name: str) -> tuple[str, bool]:
    """('float', True) for 'Optional[float]' or 'float | None'; ('', False) when no annotation."""
    t = type_name.replace("typing.", "").strip()
    m = re.fullmatch(r"Optional\[(\w+)\]|(\w+)\s*\|\s*None|None\s*\|\s*(\w+)", t)
    if m:
        return next(g for g in m.groups() if g), True
    return ("" if t == "None" else t), False


def _expected(base: str, optional: bool) -> str:
    """What a parameter of this type takes, in words."""
    words = {"int": "an integer", "float": "a finite number", "bool": "true or false", "str": "text",
             "list": "a list, e.g. [a, b]", "dict": "a mapping, e.g. {key: value}"}[base]
    return words + (" or null" if optional else "")


def _fits(base: str, value) -> bool:
    """Whether ``value`` has the type ``base`` (no bools for numbers, no NaN or infinity for floats)."""
    if base == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if base == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) < float("inf")
    return isinstance(value, {"bool": bool, "str": str, "list": list, "dict": dict}[base])


def check_value(stem: str, name: str, value, spec: dict, origin: str):
    """``value`` if it fits the type of the parameter's default (an int becomes a float where a float is meant)."""
    from .checks import describe, numeric_text

    base, optional = declared_type(spec["inferred_type_name"])
    if base not in ("int", "float", "bool", "str", "list", "dict") or (value is None and optional):
        return value
    if _fits(base, value):
        return float(value) if base == "float" else value
    hint = ""
    if base == "str" and isinstance(value, (int, float, bool)):
        hint = f" YAML read {value!r} as {type(value).__name__}; quote it to pass text (-p {name} '\"{value}\"')."
    elif base == "str" and isinstance(value, (dict, list)):
        kind = "a mapping (': ' starts one)" if isinstance(value, dict) else "a list ('[' or '- ' starts one)"
        hint = f" YAML read the text as {kind}; put it in double quotes inside the shell's: -p {name} '\"...\"'."
    elif isinstance(value, str) and base in ("int", "float") and numeric_text(value):
        hint = (" A quoted number is text; write it without quotes." if numeric_text(value) == "finite" else
                " NaN and infinity are never allowed (YAML reads nan and inf as text).")
    raise CLIError(f"{origin}: {stem} parameter {name!r} got {describe(value)}; expected {_expected(base, optional)} "
                   f"(its default is {spec['default']}).{hint} Nothing was run.")


def _listing(stem: str, declared: dict) -> str:
    """'NB's parameters are: a (int), b (list), ...'."""
    names = [f"{n} ({s['inferred_type_name']})" for n, s in declared.items() if n not in SET_BY_CLI]
    return f"{stem}'s parameters are: {', '.join(names)}" if names else f"{stem} has no parameters cell"


def unknown_error(name: str, origin: str, declared: dict[str, dict]) -> CLIError:
    """The error for a name that no notebook being run declares, listing each one's parameters."""
    if name in SET_BY_CLI:
        return CLIError(f"{origin}: {name} is set by the command line itself; use --out DIR instead. Nothing was run.")
    known = {n for d in declared.values() for n in d}
    close = difflib.get_close_matches(name, sorted(known), n=1)
    guess = f" (did you mean {close[0]!r}?)" if close else ""
    which = "the notebook" if len(declared) == 1 else "any of the notebooks"
    listing = "; ".join(_listing(stem, d) for stem, d in declared.items())
    return CLIError(f"{origin}: {name!r} is not a parameter of {which}{guess}. {listing}. Nothing was run.")


def plan_parameters(nbs: list[Path], given: dict[str, tuple[object, str]]) -> dict[Path, dict]:
    """Each notebook's checked parameters from {name: (value, origin)}; a name no notebook has is an error."""
    declared = {nb.stem: notebook_parameters(nb) for nb in nbs}
    for name, (_, origin) in given.items():
        if name in SET_BY_CLI or not any(name in d for d in declared.values()):
            raise unknown_error(name, origin, declared)
    plan = {}
    for nb in nbs:
        d = declared[nb.stem]
        plan[nb] = {n: check_value(nb.stem, n, v, d[n], origin) for n, (v, origin) in given.items() if n in d}
        skipped = sorted(set(given) - set(d))
        if skipped:
            print(f"[fltutor] {nb.stem} has no parameter {', '.join(skipped)}; not passed to it", flush=True)
    return plan


def gather_parameters(args) -> tuple[list[str], dict[str, tuple[object, str]]]:
    """Notebook names and {name: (value, origin)} from -f (first) and -p (overriding it)."""
    names, given = list(args.notebooks), {}
    if args.config:
        if not names:
            names = [notebook_for_config(args.config)]
        given.update({k: (v, args.config) for k, v in load_config(args.config).items()})
    for name, text in args.param:
        given[name] = (parse_value(name, text), f"-p {name}")
    return names, given


# ---- results -------------------------------------------------------------------------------------
def _fmt(v) -> str:
    """2 decimals for accuracies; thousands separators for counts such as parameter numbers."""
    if v is None:
        return ""
    return f"{v:,.0f}" if abs(v) >= 1000 and float(v).is_integer() else f"{v:.2f}"


def _ours(row: dict) -> str:
    """Our value of one summary row, or 'diverged at round N' for a row whose run diverged."""
    if row.get("ours") is None and row.get("diverged_round") is not None:
        return f"diverged at round {row['diverged_round']}"
    return _fmt(row.get("ours"))


def summary_frame(res: dict):
    """A notebook's summary rows as a pandas DataFrame: what, ours (or 'diverged at round N'), ± sd, paper."""
    import pandas as pd

    rows = res.get("summary", [])
    return pd.DataFrame({"": [r["what"] for r in rows], "ours": [_ours(r) for r in rows],
                         "± sd": [_fmt(r.get("ours_sd")) for r in rows], "paper": [_fmt(r.get("paper")) for r in rows]})


def print_summary(results: dict[str, Path]) -> None:
    """Print the 'summary' rows of each notebook's results.json, one table per notebook."""
    print("\n=== fltutor summary ===")
    for stem, path in results.items():
        if not path.exists():
            print(f"{stem}: no results.json (see the executed notebook)")
            continue
        res = json.loads(path.read_text())
        print(f"\n{stem}  ({res.get('data_source', '?')} data; {res.get('note', '')})")
        df = summary_frame(res)
        if len(df):
            if not (df["± sd"] != "").any():
                df = df.drop(columns="± sd")
            w = int(df[""].str.len().max())
            print(df.to_string(index=False, justify="left", formatters={"": lambda v: v.ljust(w)}))


# ---- pages to read without running ---------------------------------------------------------------
def slowest_sections(executed: Path, n: int = 3) -> list[tuple[str, float, float]]:
    """The n sections of an executed notebook that took longest: (heading, seconds, share of all cells' time).

    A section is a markdown heading and the code cells up to the next heading; the times are papermill's
    start and end stamps in each cell's metadata."""
    from datetime import datetime

    nb = json.loads(Path(executed).read_text())
    took, heading = {}, "(before the first heading)"
    for cell in nb.get("cells", []):
        src = "".join(cell.get("source", ""))
        if cell.get("cell_type") == "markdown":
            first = next((line for line in src.splitlines() if line.startswith("#")), None)
            if first:
                heading = first.lstrip("#").strip()
            continue
        stamp = cell.get("metadata", {}).get("papermill", {})
        if stamp.get("start_time") and stamp.get("end_time"):
            start, end = (datetime.fromisoformat(stamp[k].replace("Z", "+00:00")) for k in ("start_time", "end_time"))
            took[heading] = took.get(heading, 0.0) + (end - start).total_seconds()
    total = sum(took.values())
    ranked = sorted(took.items(), key=lambda kv: -kv[1])[:n]
    return [(h, t, t / total if total else 0.0) for h, t in ranked]


def write_html(executed: Path) -> Path | None:
    """The executed notebook as a standalone HTML page beside it (nbconvert's lab template; figures
    are embedded PNG images). None, with a note, where nbconvert is not installed (a bare GPU box with
    papermill alone): the page is a convenience, and the run's results are already written."""
    try:
        from nbconvert import HTMLExporter
    except ImportError:
        print(f"[fltutor] no HTML page for {executed.name}: nbconvert is not installed (pip install nbconvert); "
              "the executed notebook is beside it", file=sys.stderr, flush=True)
        return None

    body, _ = HTMLExporter(template_name="lab").from_filename(str(executed))
    page = executed.with_suffix(".html")
    tmp = page.with_name(f".{page.name}.tmp")
    tmp.write_text(body, encoding="utf-8")
    os.replace(tmp, page)
    return page


def write_index(out: Path, pages: dict[str, Path], results: dict[str, Path]) -> Path:
    """out/index.html: a link to each notebook's page and its summary table (pandas)."""
    import html

    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>fltutor runs</title>",
             "<style>body{font-family:sans-serif;max-width:70em;margin:2em auto}table{border-collapse:collapse}"
             "td,th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:left}</style></head><body>",
             f"<h1>fltutor runs</h1><p>{html.escape(os.environ.get('FLTUTOR_COMMAND', 'python -m fltutor run'))}</p>"]
    for stem, page in pages.items():
        parts.append(f"<h2><a href='{html.escape(page.relative_to(out).as_posix())}'>{html.escape(stem)}</a></h2>")
        path = results.get(stem)
        if path is None or not path.exists():
            parts.append("<p>no results.json: see the notebook's page</p>")
            continue
        res = json.loads(path.read_text())
        parts.append(f"<p>{html.escape(str(res.get('data_source', '?')))} data; {html.escape(str(res.get('note', '')))}</p>")
        parts.append(summary_frame(res).to_html(index=False, border=0))
    parts.append("</body></html>")
    index = out / "index.html"
    tmp = index.with_name(".index.html.tmp")
    tmp.write_text("\n".join(parts), encoding="utf-8")
    os.replace(tmp, index)
    return index


def divergence_lines(results: dict[str, Path]) -> list[str]:
    """One line per run that a notebook's results.json lists under 'diverged'."""
    lines = []
    for stem, path in results.items():
        for d in (json.loads(path.read_text()).get("diverged") or []) if path.exists() else []:
            where = d.get("where", "?") + ("" if d.get("client") is None else f", client {d['client']}")
            lines.append(f"[fltutor] {stem}: {d.get('what', 'a run')} diverged at round {d.get('round', '?')} "
                         f"({where}); lower {d.get('setting', 'lr')}")
    return lines


# ---- running -------------------------------------------------------------------------------------
def kernel_environment() -> None:
    """Headless kernels (no live widgets, see fltutor.plots.interact) that import this checkout's fltutor."""
    os.environ["FLTUTOR_HEADLESS"] = "1"
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(ROOT) not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), *paths])


def run_root_of(nb: Path, params: dict) -> Path | None:
    """The notebook's ``run_root`` (its cached cells and checkpoints), resolved from notebooks/, or None."""
    root = params.get("run_root", notebook_parameters(nb).get("run_root", {}).get("default"))
    if isinstance(root, str):
        root = root.strip("\"'")
    return None if not root else (NOTEBOOKS / root).resolve()


def start_fresh(nb: Path, params: dict) -> None:
    """--fresh: delete the notebook's cached cells and checkpoints (run_root/cells, sweeps, federations)."""
    import shutil

    root = run_root_of(nb, params)
    if root is None:
        return
    for sub in ("cells", "sweeps", "federations"):
        if (root / sub).is_dir():
            print(f"[fltutor] --fresh: removing {root / sub}", flush=True)
            shutil.rmtree(root / sub)


def cmd_run(args) -> int:
    """Check every parameter, run the notebooks, print the summary and any divergence."""
    if args.help:   # run --help, and run NN --help: the named notebooks' parameters too
        _, run = build_parser()
        print(run.format_help())
        for nb in find_notebooks(args.notebooks) if args.notebooks else []:
            print("\n" + parameter_help(nb))
        return 0
    names, given = gather_parameters(args)
    plan = plan_parameters(find_notebooks(names), given)
    pm = _papermill()

    kernel_environment()
    os.environ["FLTUTOR_COMMAND"] = "python -m fltutor " + " ".join(sys.argv[1:])   # for results/ provenance
    out = Path(args.out).resolve()
    results, pages = {}, {}
    for nb, params in plan.items():
        nb_out = out / nb.stem
        nb_out.mkdir(parents=True, exist_ok=True)
        if args.fresh:
            start_fresh(nb, params)
        t = time.time()
        print(f"[fltutor] running {nb.name} -> {nb_out}", flush=True)
        try:
            pm.execute_notebook(str(nb), str(nb_out / nb.name), parameters={**params, "out_dir": str(nb_out)},
                                kernel_name="python3", cwd=str(NOTEBOOKS), progress_bar=args.progress)
        finally:   # a notebook that failed still gets its page: the error is where it stopped
            if (nb_out / nb.name).exists() and (page := write_html(nb_out / nb.name)):
                pages[nb.stem] = page
        print(f"[fltutor] {nb.name} done in {time.time() - t:.0f}s", flush=True)
        if (nb_out / nb.name).exists() and (slow := slowest_sections(nb_out / nb.name)):
            print("[fltutor] slowest sections: " + "; ".join(f"{h} {sec:.0f}s ({share:.0%})" for h, sec, share in slow),
                  flush=True)
        results[nb.stem] = nb_out / "results.json"
    index = write_index(out, pages, results)
    print(f"[fltutor] pages to read: {index}", flush=True)
    print_summary(results)
    lines = divergence_lines(results)
    if lines:
        print("\n" + "\n".join(lines), flush=True)
    return EXIT_DIVERGED if lines else 0


def merge_pairs(sources, into) -> list[tuple[Path, Path]]:
    """(source folder, destination folder) per results folder named on the command line: a paper's folder
    (it holds *.csv) goes to ``into/<its name>``; a results root goes paper folder by paper folder."""
    pairs = []
    for src in map(Path, sources):
        if not src.is_dir():
            raise CLIError(f"merge: {str(src)!r} is not a folder; give a results folder (…/results/gma) or a whole "
                           f"results/ root of another checkout")
        if any(src.glob("*.csv")):
            pairs.append((src, Path(into) / src.name))
            continue
        subs = sorted(d for d in src.iterdir() if d.is_dir() and any(d.glob("*.csv")))
        if not subs:
            raise CLIError(f"merge: {src} holds no tables (*.csv), neither directly nor in a paper folder")
        pairs += [(d, Path(into) / d.name) for d in subs]
    from .results import PAPERS
    for src, dst in pairs:   # a folder named for no paper (a scratch copy: /tmp/x) would start a stray results/x
        if not dst.is_dir() and dst.name not in PAPERS:
            raise CLIError(f"merge: {src} would start a new results folder {dst}, but {dst.name!r} names no paper; "
                           f"the folder's name must be one of {', '.join(PAPERS)} (or a folder {into} already has): "
                           f"copy the tables into a folder named for their paper and merge that")
    return pairs


def cmd_merge(args) -> int:
    """Merge results tables from other checkouts or machines into this one's (``results.merge_folder``)."""
    from .results import merge_folder
    pairs = merge_pairs(args.sources, args.into)
    try:   # check every folder before writing any: a conflict anywhere stops the whole merge
        for src, dst in pairs:
            merge_folder(src, dst, replace=args.replace, dry_run=True, tables=args.tables)
        for src, dst in pairs:
            for r in merge_folder(src, dst, replace=args.replace, dry_run=args.dry_run, tables=args.tables):
                verb = "would get" if args.dry_run else ("new table," if r["created"] else "got")
                print(f"{dst / r['table']}: {verb} {r['added']} new row(s), {r['replaced']} replaced, "
                      f"{len(r['new_parts'])} new command(s)", flush=True)
                for c in r["new_parts"]:
                    print(f"    {c}", flush=True)
    except ValueError as err:
        raise CLIError(str(err)) from None
    if not args.dry_run and Path(args.into).resolve() == (ROOT / "results").resolve():
        readme_hint()
    return 0


def readme_hint() -> None:
    """After a merge into this checkout's results/: say which README tables (scripts/readme_results.py blocks) now
    lag the CSVs, so the README never quotes numbers the tables no longer hold. Silent where there is no README
    or no script (an installed package)."""
    readme, script = ROOT / "README.md", ROOT / "scripts" / "readme_results.py"
    if not (readme.is_file() and script.is_file()):
        return
    import contextlib
    import io
    from .results import load_script
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            _, changed = load_script("readme_results").render(readme.read_text())
    except Exception as err:   # a hint must not turn a finished merge into a failure
        print(f"README: could not check its generated tables ({err})", flush=True)
        return
    if changed:
        print(f"README: {len(changed)} generated table(s) or value(s) now lag results/ "
              f"({'; '.join(dict.fromkeys(changed))}); refill them with "
              "python scripts/readme_results.py", flush=True)
    if (ROOT / "scripts" / "readme_figures.py").is_file():
        try:
            figures = load_script("readme_figures")
            lag = figures.stale(ROOT / "results", ROOT / "docs" / "figures")
        except Exception as err:
            print(f"README: could not check its figures ({err})", flush=True)
            return
        if lag:
            names = ", ".join(x.split(":")[0] for x in lag)
            print(f"README: {len(lag)} figure(s) now lag results/ or the drawing code ({names}); "
                  "redraw them with python scripts/readme_figures.py", flush=True)


def build_parser() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """The top-level parser and its 'run' subcommand ('merge' is the other)."""
    listing = "notebooks:\n" + notebook_listing()
    ap = argparse.ArgumentParser(prog="python -m fltutor", description="fltutor: run the tutorial notebooks headless",
                                 epilog=listing + "\n\npython -m fltutor run NN --help lists notebook NN's parameters.",
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run", help="run notebooks through papermill and print a summary", add_help=False,
                         formatter_class=argparse.RawDescriptionHelpFormatter,
                         epilog=f"{listing}\n\nrun NN --help also lists notebook NN's parameters (type, default, meaning).\n"
                                f"Exit status: 0 done, 2 a usage error (nothing ran), {EXIT_DIVERGED} a run diverged.")
    run.add_argument("-h", "--help", action="store_true", help="show this help (and, after NN, that notebook's parameters)")
    run.add_argument("notebooks", nargs="*", help="notebooks to run (e.g. 01 or 01_fedavg_and_baselines); default: all")
    run.add_argument("-p", "--param", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                     help="set a notebook parameter (a YAML value: 0.1, 1e-3, true, '[0, 1]')")
    run.add_argument("-f", "--config", help="YAML file of parameters, e.g. configs/01_paper.yaml")
    run.add_argument("--out", default=str(ROOT / "runs" / "notebooks"), help="output folder (default runs/notebooks)")
    run.add_argument("--fresh", action="store_true",
                     help="delete each notebook's cached cells and checkpoints (run_root) first and train from scratch")
    run.add_argument("--no-progress", dest="progress", action="store_false", help="hide papermill's cell progress bar")
    merge = sub.add_parser("merge", help="merge results tables made in another checkout or on another machine",
                           description="Add the rows of results tables made elsewhere (a git worktree, a GPU machine) to "
                                       "this checkout's results/, with their commands under each JSON's parts. Rows "
                                       "already here are left alone; a row here with another value stops the merge "
                                       "unless --replace.")
    merge.add_argument("sources", nargs="+", help="results folders: one paper's (…/results/gma) or a whole results/ root")
    merge.add_argument("--into", default=str(ROOT / "results"), help="results root to merge into (default: this checkout's)")
    merge.add_argument("--replace", action="store_true", help="where a row has another value here, keep the source's")
    merge.add_argument("--dry-run", action="store_true", help="say what would change and write nothing")
    merge.add_argument("--tables", nargs="+", metavar="NAME",
                       help="merge only these tables (e.g. table1 table1_curves); default: every table of each folder")
    return ap, run


def main(argv=None) -> int:
    """Parse the command line and run it; a usage error exits with status 2."""
    ap, run = build_parser()
    args = ap.parse_args(argv)
    try:
        return cmd_merge(args) if args.cmd == "merge" else cmd_run(args)
    except CLIError as err:
        if args.cmd == "merge":
            ap.exit(2, f"python -m fltutor merge: error: {err}\n")
        run.error(str(err))   # usage line, the message, exit status 2


if __name__ == "__main__":
    sys.exit(main())
