"""Print the weighted-averaging WAFFLE full-scale tables (results/waffle_weighted/) as markdown, for the README.

    python scripts/waffle_weighted_table.py            # Table 1 (as the paper lays it out, then one row per cell),
                                                       # the stability study, SCAFFOLD's two options
    python scripts/waffle_weighted_table.py --folder other/results/waffle_weighted
    python scripts/waffle_weighted_table.py --section fig5   # one table (keys: --help)

Table 1: one row per distribution, method and client rate: Alice's best accuracy (the paper's
metric) as mean ± sample sd over the seeds that ran, the paper's number (only beside its own rate,
0.1), the final accuracy, the rounds to 99 % of the best, and the round at which a run diverged. Stability: one row per method, rate,
momentum and local steps per round, with best, final and the divergence round (seed 0 unless stated).
Control options (scripts/scaffold_control_probe.py): one row per setting, method, option, WAFFLE's
c rule and gradient clip, with best and final over the seeds, how many diverged, at which rounds, and (WAFFLE) the
aggregation weight of the agent whose training went non-finite. When training turns local: the first round at which
Alice's weight reaches 0.5 and 0.9, from Table 1's rows and from the probe's per-round curves.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from fltutor import results
from fltutor.paper_tables import WEIGHTED_WAFFLE_TABLE1

ORDER = {d: i for i, d in enumerate(["A", "B", "C", "A*", "B*"])}


def _ms(values: pd.Series, digits: int = 2) -> str:
    v = values.dropna()
    if v.empty:
        return "–"
    return f"{v.mean():.{digits}f}" + (f" ± {v.std(ddof=1):.{digits}f}" if len(v) > 1 else "")


def wide(rows: list[dict], index: list[str]) -> pd.DataFrame:
    """One row per run (the ``index`` columns), one column per metric; a missing value stays NaN."""
    df = pd.DataFrame(rows)
    df["value"] = pd.to_numeric(df["value"], errors="coerce")
    return df.groupby(index + ["metric"], dropna=False)["value"].first().unstack("metric").reset_index()


def table1(rows: list[dict]) -> pd.DataFrame:
    """Full-scale rows only (images_per_agent "all"): a reduced run merged into the same file is not the paper's scale."""
    rows = [r for r in rows if str(r.get("images_per_agent", "all")) == "all"]
    df = wide(rows, ["distribution", "method", "lr", "seed"])
    out = []
    for (d, m, lr), g in df.groupby(["distribution", "method", "lr"]):
        paper = WEIGHTED_WAFFLE_TABLE1.get(d, {}).get(m) if lr == 0.1 else None
        div = g["diverged_round"].dropna() if "diverged_round" in g else pd.Series(dtype=float)
        out.append({"distribution": d, "method": m, "lr": lr, "seeds": len(g),
                    "best (ours)": _ms(g["best_acc"]), "paper": "–" if paper is None else f"{paper[0]:.2f} ± {paper[1]:.2f}",
                    "final": _ms(g["final_acc"]) if g["final_acc"].notna().any() else "–",
                    # the first round within 1 % of the run's best (the third metric; a diverged run's
                    # best is from before its collapse)
                    "rounds to 99 % of best": _ms(g["rounds_to_99"], 1) if "rounds_to_99" in g else "–",
                    "diverged": "–" if div.empty else f"{len(div)} of {len(g)}, round {int(div.min())}"})
    out.sort(key=lambda r: (ORDER.get(r["distribution"], 9), r["method"], -r["lr"]))
    return pd.DataFrame(out)


METHODS = ["local", "fedavg", "scaffold", "weight_erosion", "waffle_weighted", "apfl"]   # the paper's row order


def table1_layout(rows: list[dict]) -> pd.DataFrame:
    """Table 1 as the paper lays it out (a row per method, a column per distribution), at the paper's rate
    0.1: "ours (n seeds) / paper" per cell, best accuracy at any round; † k: k of the n seeds diverged (their
    best is from before the collapse); – where nothing has run yet."""
    long = table1(rows)
    long = long[long["lr"] == 0.1]
    cells = {}
    for _, r in long.iterrows():
        dagger = "" if r["diverged"] == "–" else f" †{r['diverged'].split(' of ')[0]}"
        cells[r["method"], r["distribution"]] = f"{r['best (ours)']} ({r['seeds']}){dagger} / {r['paper'].split(' ±')[0]}"
    return pd.DataFrame([{"method": m, **{d: cells.get((m, d), "–") for d in ORDER}}
                         for m in METHODS + sorted(set(long["method"]) - set(METHODS))])


def _share(rounds: list[int], total: int) -> str:
    """First rounds as a share of R: "64 %", or the range over seeds "62-64 %"."""
    if not rounds:
        return "–"
    lo, hi = (round(100 * v / total) for v in (min(rounds), max(rounds)))
    return f"{lo} %" if lo == hi else f"{lo}-{hi} %"


def turns_local(rows: list[dict]) -> pd.DataFrame:
    """When training turns local, at full scale: the first round at which Alice's aggregation weight reaches 0.5
    and 0.9 (WE and WAFFLE), per seed and as a share of R. The paper: after 70-90 % of the rounds."""
    rows = [r for r in rows if str(r.get("images_per_agent", "all")) == "all"]
    df = wide(rows, ["distribution", "method", "lr", "rounds", "seed"])
    if "alice_weight_half_round" not in df:
        return pd.DataFrame()
    df = df[df["alice_weight_half_round"].notna() | df["alice_weight_90_round"].notna()]
    out = []
    for (d, m, lr, R), g in df.groupby(["distribution", "method", "lr", "rounds"]):
        half, ninety = (g[c].dropna().astype(int).tolist() for c in ("alice_weight_half_round", "alice_weight_90_round"))
        out.append({"distribution": d, "method": m, "lr": lr, "seeds": len(g),
                    "weight >= 0.5 from round": ", ".join(map(str, half)) or "never",
                    "weight >= 0.9 from round": ", ".join(map(str, ninety)) or "never",
                    "0.9 as a share of R": _share(ninety, R),
                    "_o": (ORDER.get(d, 9), m, -lr)})
    out.sort(key=lambda r: r.pop("_o"))
    return pd.DataFrame(out)


def turns_local_clipped(curve_rows: list[dict]) -> pd.DataFrame:
    """The same from scripts/scaffold_control_probe.py's per-round curves (runs that stay finite long enough to
    turn local: with a gradient clip, or with the classic LeNet-5): one row per setting, the crossing rounds seed
    by seed ("never" where a seed's weight never reaches the level)."""
    df = pd.DataFrame([r for r in curve_rows if r["metric"] == "alice_weight"])
    if df.empty:
        return pd.DataFrame()
    df["c_rule"] = df["c_rule"].fillna("increments")
    df["model"] = df["model"].fillna("lenet5") if "model" in df else "lenet5"
    keys = ["distribution", "images_per_agent", "method", "lr", "rounds", "grad_clip_norm", "c_rule", "model"]
    out = []
    for k, g in df.groupby(keys, sort=False):
        d = dict(zip(keys, k))
        first = {lvl: [int(s["round"][s["value"] >= lvl].min()) if (s["value"] >= lvl).any() else None
                       for _, s in g.sort_values("round").groupby("seed")] for lvl in (0.5, 0.9)}
        ninety = [v for v in first[0.9] if v is not None]
        out.append({"setting": f"{d['distribution']}, {d['images_per_agent']} images, {d['rounds']} rounds"
                               + ("" if d["model"] == "lenet5" else f", {d['model']}"),
                    "method": d["method"], "clip": f"{d['grad_clip_norm']:g}", "c rule": d["c_rule"],
                    "seeds": len(first[0.5]),
                    **{f"weight >= {lvl:g} from round": ", ".join("never" if v is None else str(v) for v in first[lvl])
                       for lvl in (0.5, 0.9)},
                    "0.9 as a share of R": _share(ninety, d["rounds"])})
    return pd.DataFrame(out)


def stability(rows: list[dict]) -> pd.DataFrame:
    df = wide(rows, ["method", "lr", "momentum", "local_steps", "images_per_agent", "seed"])
    df = df.sort_values(["method", "lr", "momentum", "local_steps"], ascending=[True, False, True, True])
    return pd.DataFrame({"method": df["method"], "lr": df["lr"], "momentum": df["momentum"],
                         "local steps K": df["local_steps"], "images per agent": df["images_per_agent"],
                         "best": df["best_acc"].map(lambda v: "–" if pd.isna(v) else f"{v:.1f}"),
                         "final": df["final_acc"].map(lambda v: "–" if pd.isna(v) else f"{v:.1f}"),
                         "diverged at round": df["diverged_round"].map(lambda v: "–" if pd.isna(v) else f"{v:.0f}")})


def controls(rows: list[dict]) -> pd.DataFrame:
    rows = [{"nonfinite": "", **r} for r in rows]        # tables written before the set-aside rule existed
    rows = [{**r, "grad_clip_norm": float(r.get("grad_clip_norm") or 0),   # ... or clipping (0: off)
             "model": r.get("model") or "lenet5"} for r in rows]            # ... or another network (none: ours)
    keys = ["distribution", "images_per_agent", "local_steps", "lr", "rounds", "method", "control", "c_rule", "nonfinite",
            "grad_clip_norm", "model"]
    df = wide(rows, keys + ["seed"])
    text = df[["c_rule", "nonfinite"]].astype(object)   # a column with no value reads as float NaN
    df[["c_rule", "nonfinite"]] = text.where(text.notna(), "")
    out = []
    for k, g in df.groupby(keys, dropna=False, sort=False):
        d = dict(zip(keys, k))
        gone = g[g["diverged_round"].notna()].sort_values("diverged_round")
        div = [int(v) for v in gone["diverged_round"]]
        wts = gone["diverged_agent_weight"].dropna() if "diverged_agent_weight" in g else pd.Series(dtype=float)
        out.append({"setting": f"{d['distribution']}, {d['images_per_agent']} images (K = {d['local_steps']}), "
                               f"lr {d['lr']:g}, {d['rounds']} rounds",
                    "method": d["method"], "option": d["control"], "c rule": d["c_rule"] or "–",
                    "non-finite agent": d["nonfinite"] or ("stop" if d["method"] == "waffle_weighted" else "–"),
                    "gradient clip": f"{d['grad_clip_norm']:g}" if d["grad_clip_norm"] else "–",
                    "network": "LeNet-5, ReLU + max-pool" if d["model"] == "lenet5" else
                    "LeNet-5, tanh + avg-pool" if d["model"] == "lenet5_classic" else d["model"],
                    "seeds": len(g),
                    "best": _ms(g["best_acc"]), "final": _ms(g["final_acc"]),
                    "diverged": f"{len(div)} of {len(g)}" + (f" (rounds {', '.join(map(str, div))})" if div else ""),
                    "weight of the agent that diverged": ", ".join(f"{w:.2f}" for w in wts) if len(wts) else "–",   # round order
                    "_order": (ORDER.get(d["distribution"], 9), d["images_per_agent"], d["method"],
                               d["control"] != "II", d["c_rule"], d["nonfinite"] not in ("", "stop"),
                               d["grad_clip_norm"], d["model"] != "lenet5")})
    out.sort(key=lambda r: r.pop("_order"))   # paper's option II first, then I; the paper's c rule first
    return pd.DataFrame(out)


# Fig. 5 / Table 4 (configs/04_fig5.yaml): the config's label distribution "B" is Table 1's B, which Table 4 calls C
FIG5_LABELS = {"A": "A (IID)", "B": "C (= Table 1's B)"}
FIG5_SIZES = {"A": "size A (equal)", "B": "size B (6-21 %)", "C": "size C (agent 4 twice)"}


def fig5(rows: list[dict]) -> pd.DataFrame:
    """Fig. 5 / Table 4: Weight Erosion with the paper's distance penalty p_d and without it (p_d = 0), one row per
    (images per agent, label distribution), one column per size distribution: Alice's best accuracy (final in
    brackets) as the mean over seeds (± sd with several), "with p_d / without"."""
    df = wide(rows, ["images_per_agent", "label", "size", "p_d", "seed"])
    df["p_d"] = pd.to_numeric(df["p_d"])
    out = []
    for (imgs, label), g in sorted(df.groupby(["images_per_agent", "label"]), key=lambda kv: (str(kv[0][0]), kv[0][1])):
        pds = sorted(g["p_d"].unique(), reverse=True)           # the paper's p_d first, then 0
        row = {"images per agent": imgs, "label distribution": FIG5_LABELS.get(label, label),
               "p_d": " / ".join(f"{v:g}" for v in pds), "seeds": g["seed"].nunique()}
        for size, name in FIG5_SIZES.items():
            cells = []
            for v in pds:
                c = g[(g["size"] == size) & (g["p_d"] == v)]
                cells.append("–" if c.empty else f"{_ms(c['best_acc'], 1)} ({_ms(c['final_acc'], 1)})")
            row[name] = " / ".join(cells)
        out.append(row)
    return pd.DataFrame(out)


def sections(folder) -> list[tuple[str, str, object]]:
    """(key for --section, table file, printer) in the order they are printed."""
    variants = sorted(p.stem for p in Path(folder).glob("table1_*.csv") if not p.stem.endswith("_curves"))
    return [("table1_layout", "table1", table1_layout), ("table1", "table1", table1), ("turns_local", "table1", turns_local),
            *((v, v, table1) for v in variants),        # Table 1 clipped or with another network: never pooled
            ("stability", "stability", stability), ("scaffold_control", "scaffold_control", controls),
            ("turns_local_clipped", "scaffold_control_curves", turns_local_clipped), ("fig5", "fig5", fig5)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--folder", default=str(results.RESULTS_DIR / "waffle_weighted"))
    ap.add_argument("--section", help="print only this table (what scripts/readme_results.py fills in): "
                    + ", ".join(k for k, _, _ in sections(results.RESULTS_DIR / "waffle_weighted")))
    a = ap.parse_args()
    folder = Path(a.folder)
    chosen = [s for s in sections(folder) if a.section in (None, s[0])]
    if a.section and not chosen:
        raise SystemExit(f"--section {a.section!r}: not a table of {folder}; choose one of "
                         + ", ".join(k for k, _, _ in sections(folder)))
    try:   # the folder as the reader's checkout names it, so the README does not depend on where it was printed
        shown = folder.resolve().relative_to(results.RESULTS_DIR.parent.resolve())
    except ValueError:
        shown = folder
    found = False
    for key, name, make in chosen:
        got = results.read_table(folder, name)
        if got is None:
            continue
        found = True
        rows, meta = got
        what = "seed 0 unless the table says otherwise" if name == "stability" else results.scales(meta)
        print(f"{'' if a.section else chr(10)}{shown}/{name}.csv ({len(rows)} rows; {what}; {results.devices(meta)}):\n")
        print(make(rows).to_markdown(index=False, disable_numparse=True))
    if not found:
        raise SystemExit(f"no {'--section ' + a.section + ' table' if a.section else 'tables'} in {folder} yet: run "
                         "configs/04_paper.yaml, configs/04_stability.yaml or configs/04_fig5.yaml")

if __name__ == "__main__":
    main()
