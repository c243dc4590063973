"""Command line: ``python -m fltutor run [NOTEBOOK ...] [-p NAME VALUE ...] [-f CONFIG.yaml] [--out DIR]``.

Runs the numbered notebooks headless through papermill (kernel ``python3``, working
directory ``notebooks/``), each writing its executed copy and ``results.json`` under DIR,
then prints every notebook's summary rows: our numbers beside the paper's.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"


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
            raise SystemExit(f"notebook {name!r} matches {[h.name for h in hits] or 'nothing'}; "
                             f"choose from {[nb.stem for nb in all_nbs]}")
        out.append(hits[0])
    return out


def load_config(path: str) -> dict:
    """A flat YAML mapping of notebook parameters (the same file ``papermill -f`` takes)."""
    cfg = yaml.safe_load(Path(path).read_text()) or {}
    if not isinstance(cfg, dict):
        raise SystemExit(f"{path}: expected a YAML mapping of parameter: value, got {type(cfg).__name__}")
    return cfg


def notebook_for_config(path: str) -> str:
    """configs/NN_*.yaml belongs to notebook NN."""
    stem = Path(path).stem
    if not stem[:2].isdigit():
        raise SystemExit(f"{path}: cannot tell which notebook it is for; name it NN_something.yaml or "
                         "also name the notebook on the command line")
    return stem[:2]


def _fmt(v) -> str:
    """2 decimals for accuracies; thousands separators for counts such as parameter numbers."""
    if v is None:
        return ""
    return f"{v:,.0f}" if abs(v) >= 1000 and float(v).is_integer() else f"{v:.2f}"


def print_summary(results: dict[str, Path]) -> None:
    """Print the 'summary' rows of each notebook's results.json."""
    print("\n=== fltutor summary ===")
    for stem, path in results.items():
        if not path.exists():
            print(f"{stem}: no results.json (see the executed notebook)")
            continue
        res = json.loads(path.read_text())
        print(f"\n{stem}  ({res.get('data_source', '?')} data; {res.get('note', '')})")
        rows = res.get("summary", [])
        if rows:
            w = max(len(r["what"]) for r in rows)
            print(f"  {'':{w}}  {'ours':>8}  {'paper':>8}")
            for r in rows:
                print(f"  {r['what']:{w}}  {_fmt(r.get('ours')):>8}  {_fmt(r.get('paper')):>8}")


def cmd_run(args) -> int:
    import papermill as pm

    names = list(args.notebooks)
    params: dict = {}
    if args.config:
        if not names:
            names = [notebook_for_config(args.config)]
        params.update(load_config(args.config))
    for name, value in args.param:
        params[name] = yaml.safe_load(value)  # "0.1" -> 0.1, "true" -> True, "[1, 2]" -> list
    os.environ["FLTUTOR_HEADLESS"] = "1"  # kernels inherit it: no live widgets (see fltutor.plots.interact)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    results = {}
    for nb in find_notebooks(names):
        nb_out = out / nb.stem
        nb_out.mkdir(parents=True, exist_ok=True)
        t = time.time()
        print(f"[fltutor] running {nb.name} -> {nb_out}", flush=True)
        pm.execute_notebook(str(nb), str(nb_out / nb.name), parameters={**params, "out_dir": str(nb_out)},
                            kernel_name="python3", cwd=str(NOTEBOOKS), progress_bar=args.progress)
        print(f"[fltutor] {nb.name} done in {time.time() - t:.0f}s", flush=True)
        results[nb.stem] = nb_out / "results.json"
    print_summary(results)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fltutor", description="fltutor: run the tutorial notebooks headless")
    sub = ap.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run", help="run notebooks through papermill and print a summary")
    run.add_argument("notebooks", nargs="*", help="notebooks to run (e.g. 01 or 01_fedavg_and_baselines); default: all")
    run.add_argument("-p", "--param", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                     help="set a notebook parameter (YAML value)")
    run.add_argument("-f", "--config", help="YAML file of parameters, e.g. configs/01_paper.yaml")
    run.add_argument("--out", default=str(ROOT / "runs" / "notebooks"), help="output folder (default runs/notebooks)")
    run.add_argument("--no-progress", dest="progress", action="store_false", help="hide papermill's cell progress bar")
    args = ap.parse_args(argv)
    return cmd_run(args)


if __name__ == "__main__":
    sys.exit(main())
