"""Draw the README's figures from results/ (docs/figures/*.png), or check that they are up to date.

    python scripts/readme_figures.py           # redraw every figure
    python scripts/readme_figures.py --check   # change nothing; exit 1 naming each figure its tables have outgrown

Each figure is drawn from committed tables only (never from runs/), and its PNG records the SHA-256 of every
table it read (a "Source" text chunk) and of the code that drew it (a "Code" chunk: this script and
fltutor/plots.py). `--check` compares those with the tables and the code as they are now, so after a merge into
results/, or an edit to the drawing, a stale figure fails `pytest` (tests/test_readme_figures.py) the way a stale
README table does; redraw, look at it, commit. The figures:

- waffle_ibp_epochs.png: WAFFLe's lead over FedAvg against the local epochs E (Tables 6-7), beside the paper's.
- gma_table10.png: GMA's Table 10 at the paper's protocol, AVG, GMA and GMA - AVG over the learning-rate grid,
  above the paper's (the same drawing as notebook 03, section 4: fltutor.plots.plot_table10_results).
- gma_ablations.png: GMA's Tables 8, 9 and 6 and Fig. 3d on all of FMNIST: AVG and GMA against N, E, client
  momentum and τ, and GMA's lead seed by seed, beside the paper's.
- gma_tables2_3.png: GMA's Tables 2-3 on the whole data, GMA − AVG seed by seed for each way the learning rates were
  chosen (one fixed pair, each its own held-out pick, the pair best for both), beside the paper's lead, and the two
  accuracies joined, beside the paper's (the same drawing as notebook 03, section 13: fltutor.plots.plot_gma_tables2_3).
- waffle_ibp_table1.png: weight-factorization WAFFLe's Table 1, the majority's and the minority's accuracy per
  method on the multimodal split, mean ± sd over seeds, with the paper's numbers as markers.
- waffle_weighted_table1.png: weighted-averaging WAFFLE's Table 1, each method's best accuracy (the paper's
  metric) per distribution, mean ± sd over seeds, its final accuracy beside it (a collapse shows as a gap) and
  the paper's number as a marker.
- privacy_audit.png: the privacy audit (notebook 05 at full scale): each method's membership-inference AUC,
  with its local accuracy, MNIST and FMNIST.
- waffle_weighted_collapse.png: the same runs' raw accuracy round by round under concept shift (A*, B*), where
  WAFFLE's and SCAFFOLD's weights turn non-finite, beside WAFFLE's running best (what the paper plots).
"""
from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from fltutor import audit, plots, results  # noqa: E402
from fltutor.results import load_script  # noqa: E402
from fltutor.paper_tables import WAFFLE_IBP_TABLE1, WEIGHTED_WAFFLE_TABLE1  # noqa: E402
from fltutor.partition import MULTIMODAL_PRESETS  # noqa: E402
from fltutor.plots import plot_gma_tables2_3, plot_table10_results  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "figures"


def fingerprint(paths: list[Path], root: Path) -> str:
    """'<path> sha256:<hex>; ...' over the tables a figure reads (CSV and JSON), by their path under ``root``."""
    return "; ".join(f"{p.relative_to(root).as_posix()} sha256:{hashlib.sha256(p.read_bytes()).hexdigest()[:16]}"
                     for p in sorted(paths))


def code_fingerprint() -> str:
    """'<file> sha256:<hex>; ...' over the drawing code: this script and fltutor/plots.py (any edit to either counts,
    even one that leaves the pixels as they were: redrawing costs seconds, a figure drawn by old code misleads)."""
    return "; ".join(f"{p.name} sha256:{hashlib.sha256(p.read_bytes()).hexdigest()[:16]}"
                     for p in (Path(__file__).resolve(), Path(plots.__file__).resolve()))


def _summary(vals: list[float]) -> tuple[float, float, int]:
    """(mean, sample sd, n) of the values; (nan, 0, 0) when there are none (every seed diverged or none ran)."""
    a = np.asarray(vals, dtype=float)
    if not len(a):
        return float("nan"), 0.0, 0
    return float(a.mean()), float(a.std(ddof=1)) if len(a) > 1 else 0.0, len(a)


def _diverged(rows: list[dict]) -> int:
    """How many of ``rows``' runs diverged (a diverged_round row with a value)."""
    return sum(1 for r in rows if r["metric"] == "diverged_round" and r["value"] is not None)


def gma_table10(folder: Path):
    rows, meta = results.read_table(folder / "gma", "table10")
    return plot_table10_results(rows, meta)


def gma_tables2_3(folder: Path):
    rows, meta = results.read_table(folder / "gma", "tables2_3")
    return plot_gma_tables2_3(rows, meta)


def gma_ablations(folder: Path):
    """GMA's Tables 8, 9 and 6 and Fig. 3d on all of FMNIST (scripts/gma_ablations.py; the last-10 mean, the
    paper's metric for them). Top: AVG and GMA, mean ± sd over seeds, the paper's as open markers. Bottom: GMA − AVG
    seed by seed (grey dots), their mean ± sd (black), the paper's lead (red); for τ, GMA at τ minus GMA at τ = 0 of
    the same seed, since τ = 0 is plain averaging on that seed's device. A value not run yet shows only the paper."""
    table = load_script("gma_table")
    rows, _ = results.read_table(folder / "gma", "ablations_full")
    panels = (("clients", "Table 8: clients N (all in every round)", "N"),
              ("epochs", "Table 9: local epochs E", "E"),
              ("momentum", "Table 6: client momentum", "momentum"),
              ("tau", "Fig. 3d: threshold τ (the paper: CIFAR-10, no numbers)", "τ"))
    fig, axes = plt.subplots(2, 4, figsize=(17, 7.2), sharex="col")
    for col, (varied, title, xlabel) in enumerate(panels):
        top, bottom = axes[0, col], axes[1, col]
        cells = table.per_seed(rows, varied)
        pair = max({k[1:] for k in cells}, key=lambda p: sum(k[1:] == p for k in cells), default=None)
        cells = {k[0]: c for k, c in cells.items() if k[1:] == pair}
        paper = table.PAPER_ABLATIONS[varied][1] if varied in table.PAPER_ABLATIONS else {}
        xs_all = sorted(set(cells) | set(paper))
        pos = (lambda v: xs_all.index(v)) if varied == "momentum" else (lambda v: v)   # momentum: two categories
        most = max((len(d) for c in cells.values() for d in c.values()), default=0)

        def few(ax, x, y, n):   # a point over fewer seeds than the panel's others says so
            if n < most:
                ax.annotate(f"{n} seed{'s' * (n > 1)}", (x, y), xytext=(4, 4), textcoords="offset points", fontsize=6)

        seeds_n, noted = set(), set()   # noted: the values whose top-panel point already says its seed count
        # AVG ran once per seed in the tau sweep (it does not read tau): there the tau = 0 point is plain averaging
        for agg, colour, ls, dx in (("AVG", "C0", "--", -0.02), ("GMA", "C3", "-", 0.02))[varied == "tau":]:
            pts = [(v, [x for x in c.get(agg, {}).values() if x is not None]) for v, c in cells.items()]
            pts = [(v, vals) for v, vals in pts if vals]
            if pts:
                m = np.array([_summary(vals)[:2] for _, vals in pts])
                seeds_n |= {len(vals) for _, vals in pts}
                xs = np.array([pos(v) * (1 + dx) if varied in ("clients", "epochs") else pos(v) + dx for v, _ in pts])
                full = np.array([len(vals) == most for _, vals in pts])   # the line joins only the points of
                top.errorbar(xs[full], m[full, 0], yerr=m[full, 1], fmt="o" + ls, color=colour, ms=4, capsize=3,
                             label=f"{agg}, ours" + (" (τ = 0: plain averaging)" if varied == "tau" else ""))
                top.errorbar(xs[~full], m[~full, 0], yerr=m[~full, 1], fmt="o", mfc="none", color=colour, ms=4,
                             capsize=3)   # every seed; a point over fewer stands apart, open, and says how many
                for x, (v, vals), y in zip(xs, pts, m[:, 0]):
                    if v not in noted:   # AVG and GMA share a count: one label, not two on top of each other
                        few(top, x, y, len(vals))
                        noted.add(v)
            if paper:
                pv = [(v, p[0 if agg == "AVG" else 1]) for v, p in sorted(paper.items())]
                top.plot([pos(v) for v, _ in pv], [p for _, p in pv], "D" if agg == "GMA" else "s", mfc="none",
                         color=colour, ms=6, label=f"{agg}, the paper")
        if varied == "tau":   # GMA at tau minus GMA at tau 0, seed by seed
            zero = cells.get(0.0, {}).get("GMA", {})
            leads = {v: {s: x - zero[s] for s, x in c.get("GMA", {}).items()
                         if x is not None and zero.get(s) is not None} for v, c in cells.items()}
            bottom.axvline(0.4, color="C3", ls=":", lw=1)
            bottom.text(0.41, 0.02, "the paper's best τ", transform=bottom.get_xaxis_transform(), fontsize=7,
                        color="C3")
            ylabel = "GMA at τ − GMA at τ = 0 (points)"
        else:
            leads = {v: {s: x - c["AVG"][s] for s, x in c.get("GMA", {}).items()
                         if x is not None and c.get("AVG", {}).get(s) is not None} for v, c in cells.items()}
            ylabel = "GMA − AVG (points)"
        for v, d in sorted(leads.items()):
            if not d:
                continue
            bottom.scatter([pos(v)] * len(d), list(d.values()), s=12, color="0.55", zorder=2)
            m, sd, _ = _summary(list(d.values()))
            bottom.errorbar([pos(v)], [m], yerr=[sd], fmt="o", color="k", ms=5, capsize=4, zorder=3)
            few(bottom, pos(v), m, len(d))
        if leads:
            bottom.scatter([], [], s=12, color="0.55", label="one seed")
            bottom.errorbar([], [], yerr=[], fmt="o", color="k", label="ours, mean ± sd")
        if paper:
            bottom.plot([pos(v) for v in sorted(paper)], [paper[v][1] - paper[v][0] for v in sorted(paper)], "D",
                        mfc="none", color="C3", ms=6, label="the paper")
        bottom.axhline(0, color="k", lw=0.8)
        if varied in ("clients", "epochs"):
            for ax in (top, bottom):
                ax.set_xscale("log")
                ax.set_xticks(xs_all, [f"{v:g}" for v in xs_all])
                ax.minorticks_off()
        elif varied == "momentum":
            bottom.set_xticks(range(len(xs_all)), [f"{v:g}" for v in xs_all])
            bottom.set_xlim(-0.6, len(xs_all) - 0.4)
        seeds = "-".join(map(str, sorted({min(seeds_n), max(seeds_n)}))) if seeds_n else "0"
        top.set_title(f"{title}\n{seeds} seeds per point" + ("" if pair is None else
                      f", client / server lr {pair[0]:g} / {pair[1]:g}"), fontsize=9)
        top.set(ylabel="last-10 test accuracy (%)" if col == 0 else None)
        bottom.set(xlabel=xlabel, ylabel=ylabel)
        for ax in (top, bottom):
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
    fig.suptitle("GMA's ablations on all of FMNIST (two classes per client, every client every round, 100 rounds, "
                 "momentum 0.9 unless varied): ours filled, the paper's open", fontsize=10)
    fig.tight_layout()
    return fig


IBP_ORDER = ("fedavg", "fedprox", "qffl", "fedper", "pfedme", "waffle_ibp")
IBP_NAMES = {"fedavg": "FedAvg", "fedprox": "FedProx", "qffl": "q-FFL", "fedper": "FedPer", "pfedme": "pFedMe",
             "waffle_ibp": "WAFFLe"}


def waffle_ibp_table1(folder: Path):
    rows, _ = results.read_table(folder / "waffle_ibp", "tables1_2")
    datasets = [d for d in ("mnist", "fashionmnist") if any(r["dataset"] == d for r in rows)]
    fig, axes = plt.subplots(1, len(datasets), figsize=(6.2 * len(datasets), 4.2), squeeze=False)
    for ax, ds in zip(axes[0], datasets):
        preset = "-".join(str(c) for c in MULTIMODAL_PRESETS[ds][-1][0])
        mine = [r for r in rows if r["dataset"] == ds and r["mode"] == "multimodal" and r["rounds"] in (None, 100)
                and (r["minority_classes"] or preset) == preset]
        groups = sorted({(r["method"], r["variant"] or "") for r in mine if r["method"] in IBP_ORDER},
                        key=lambda k: (IBP_ORDER.index(k[0]), k[1]))
        x = np.arange(len(groups))
        for k, (metric, colour, dx) in enumerate((("majority", "C0", -0.2), ("minority", "C3", 0.2))):
            stats = [_summary([r["value"] for r in mine if (r["method"], r["variant"] or "") == g
                               and r["metric"] == metric and r["value"] is not None]) for g in groups]
            ax.bar(x + dx, [s[0] for s in stats], 0.4, yerr=[s[1] for s in stats], color=colour, alpha=0.8,
                   capsize=3, label=f"{metric}, ours (mean ± sd)")
            for xi, g in zip(x, groups):   # a run that diverged has no accuracy: say so where its bar would be
                runs = [r for r in mine if (r["method"], r["variant"] or "") == g]
                if _diverged(runs):
                    ax.text(xi + dx, 3, f"diverged ({_diverged(runs)}/{len({r['seed'] for r in runs})})",
                            rotation=90, ha="center", va="bottom", fontsize=7)
            paper = [WAFFLE_IBP_TABLE1[metric].get(ds, {}).get(g[0]) for g in groups]
            ax.scatter([xi + dx for xi, p in zip(x, paper) if p is not None], [p for p in paper if p is not None],
                       marker="D", s=28, color="k", zorder=3, label="the paper" if k else None)
        seeds = sorted({r["seed"] for r in mine})
        labels = [IBP_NAMES[m] + (f"\n{v.split(',')[0]}" if v and m != "waffle_ibp" else "") for m, v in groups]
        ax.set_xticks(x, labels, fontsize=8)
        ax.set_ylim(max(0, min(ax.get_ylim()[0], 40)), 101)
        ax.set(ylabel="local test accuracy (%)", title=f"{ds}: multimodal split, minority classes {preset} "
               f"({len(seeds)} seeds)")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7, loc="lower left")
    fig.suptitle("Weight-factorization WAFFLe, Table 1 at full scale (T = 100): does the minority keep up?", fontsize=10)
    fig.tight_layout()
    return fig


def waffle_ibp_epochs(folder: Path):
    """WAFFLe's lead over FedAvg (local test accuracy, seed by seed) against the local epochs E, Tables 6-7 (T = 50):
    a line per (dataset, mode, KL weight) with its sd band, the paper's lead as open markers. The selection probe
    explains the fall at notebook 02's KL weight 0.1: the KL pulls the private selections back to the prior once
    per mini-batch step, so a longer round erases them (README, "Why, measured on the runs themselves")."""
    table = load_script("waffle_ibp_table")
    rows, _ = results.read_table(folder / "waffle_ibp", "ablations")
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    k = 0
    for kl in table.epochs_kls(rows):
        leads = table.epochs_leads(rows, kl)
        for ds, mode in sorted({key[:2] for key in leads}):
            cells = sorted((key[3], c) for key, c in leads.items() if key[:2] == (ds, mode) and c.get("local_acc")
                           and c["local_acc"]["n"] >= 3)
            if len(cells) < 2:   # a single E is no line (one-off probes at other KL weights, 2 seeds)
                continue
            es = [e for e, _ in cells]
            mean = np.array([c["local_acc"]["mean"] for _, c in cells])
            sd = np.array([c["local_acc"]["sd"] or 0.0 for _, c in cells])
            colour = f"C{k}"
            k += 1
            ax.plot(es, mean, "o-", color=colour, label=f"{ds} {mode}, KL weight {kl:g} ({cells[0][1]['local_acc']['n']} seeds)")
            ax.fill_between(es, mean - sd, mean + sd, color=colour, alpha=0.15)
            paper = [(e, c["paper"]) for e, c in cells if c.get("paper") is not None]
            if paper and kl == table.DEFAULT_KL:
                ax.plot(*zip(*paper), "D--", mfc="none", color=colour, lw=0.8, label=f"{ds} {mode}, the paper")
    ax.axhline(0, color="k", lw=0.8)
    ax.set(xlabel="local epochs E", ylabel="WAFFLe − FedAvg, local test accuracy (points)",
           title="Tables 6-7 (T = 50): WAFFLe's lead over FedAvg as E grows, mean ± sd over seeds")
    ax.title.set_fontsize(9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


WW_ORDER = ("local", "fedavg", "scaffold", "weight_erosion", "waffle_weighted", "apfl")
WW_NAMES = {"local": "Local", "fedavg": "FedAvg", "scaffold": "SCAFFOLD", "weight_erosion": "Weight Erosion",
            "waffle_weighted": "WAFFLE", "apfl": "APFL"}


def waffle_weighted_table1(folder: Path):
    rows, _ = results.read_table(folder / "waffle_weighted", "table1")
    rows = [r for r in rows if float(r["lr"]) == 0.1 and str(r["images_per_agent"]) == "all" and int(r["rounds"]) == 100]
    dists = [d for d in ("A", "B", "C", "A*", "B*") if any(r["distribution"] == d for r in rows)]
    fig, ax = plt.subplots(figsize=(12, 4.4))
    w = 0.8 / len(WW_ORDER)
    for k, m in enumerate(WW_ORDER):
        xs = np.arange(len(dists)) + (k - (len(WW_ORDER) - 1) / 2) * w
        best = [_summary([r["value"] for r in rows if (r["distribution"], r["method"], r["metric"]) == (d, m, "best_acc")
                          and r["value"] is not None] or [np.nan]) for d in dists]
        final = [_summary([r["value"] for r in rows if (r["distribution"], r["method"], r["metric"]) == (d, m, "final_acc")
                           and r["value"] is not None] or [np.nan]) for d in dists]
        ax.bar(xs, [b[0] for b in best], w * 0.92, yerr=[b[1] for b in best], capsize=2, color=f"C{k}", alpha=0.85,
               label=WW_NAMES[m])
        for xi, d, b in zip(xs, dists, best):   # a run whose weights turned non-finite keeps its best, has no final
            runs = [r for r in rows if (r["distribution"], r["method"]) == (d, m)]
            if _diverged(runs):
                ax.text(xi, 2, f"{_diverged(runs)}/{len({r['seed'] for r in runs})} diverged", rotation=90,
                        ha="center", va="bottom", fontsize=6)
        ax.scatter(xs, [f[0] for f in final], marker="_", s=90, color="k", zorder=3,
                   label="final accuracy (ours)" if k == 0 else None)
        paper = [WEIGHTED_WAFFLE_TABLE1.get(d, {}).get(m, (np.nan,))[0] for d in dists]
        ax.scatter(xs, paper, marker="D", s=18, color="w", edgecolor="k", zorder=4, label="the paper" if k == 0 else None)
    seeds = sorted({r["seed"] for r in rows})
    ax.set_xticks(range(len(dists)), [f"distribution {d}" for d in dists])
    ax.set(ylabel="test accuracy of the target agent (%)", ylim=(0, 101),
           title=f"Weighted-averaging WAFFLE, Table 1 at full scale (all of MNIST, R = 100, {len(seeds)} seeds)\nbest "
                 "accuracy at any round (bars, mean ± sd), final accuracy of the runs that stayed finite (dash), the paper "
                 "(diamond)")
    ax.title.set_fontsize(9)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7, ncol=8, loc="upper center", bbox_to_anchor=(0.5, -0.08))
    fig.tight_layout()
    return fig


def waffle_weighted_collapse(folder: Path):
    """The raw test accuracy of the target agent round by round under concept shift (A*, B*) for WAFFLE, SCAFFOLD and
    Weight Erosion, one thin line per seed; a run whose weights turned non-finite stops there (x). The paper plots
    the best accuracy so far, which hides this; WAFFLE's running best is drawn dashed for comparison."""
    rows, _ = results.read_table(folder / "waffle_weighted", "table1_curves")
    curves: dict[tuple, dict[int, float]] = {}
    for r in rows:   # rows written before the lr column was kept have none; a run at another rate is left out
        if r["metric"] != "alice_acc" or r["value"] is None or (r["lr"] is not None and float(r["lr"]) != 0.1):
            continue
        curves.setdefault((r["distribution"], r["method"], r["seed"]), {})[int(r["round"])] = float(r["value"])
    dists = [d for d in ("A*", "B*") if any(k[0] == d for k in curves)]
    shown = {"waffle_weighted": ("WAFFLE", "C4"), "scaffold": ("SCAFFOLD", "C2"), "weight_erosion": ("Weight Erosion", "C3")}
    fig, axes = plt.subplots(1, len(dists), figsize=(6.2 * len(dists), 3.8), squeeze=False)
    for ax, d in zip(axes[0], dists):
        last = max(max(c) for k, c in curves.items() if k[0] == d)
        for m, (name, colour) in shown.items():
            runs = sorted((k[2], c) for k, c in curves.items() if k[:2] == (d, m))
            for n, (seed, c) in enumerate(runs):
                x = sorted(c)
                ax.plot(x, [c[i] for i in x], color=colour, lw=0.8, alpha=0.45 if m == "weight_erosion" else 0.8, label=f"{name} ({len(runs)} seeds)" if n == 0 else None)
                if x[-1] < last:
                    ax.plot(x[-1], c[x[-1]], "x", color=colour, ms=6)
                if m == "waffle_weighted":   # best so far, held to the last round as a best-so-far plot shows it
                    best = list(np.maximum.accumulate([c[i] for i in x]))
                    ax.plot(x + [last], best + best[-1:], color=colour, lw=1, ls="--",
                            label="WAFFLE, best so far (the paper's kind of curve)" if n == 0 else None)
        ax.set(xlabel="round", ylabel="test accuracy of the target agent (%)", ylim=(0, 101), xlim=(0, last + 1),
               title=f"distribution {d}: raw accuracy per round; x: weights turned non-finite")
        ax.title.set_fontsize(9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    fig.suptitle("Weighted-averaging WAFFLE at full scale (all of MNIST, lr 0.1): where the running best hides a collapse",
                 fontsize=10)
    fig.tight_layout()
    return fig


PRIVACY_DATASETS = ("mnist", "fashionmnist")


def privacy_audit(folder: Path):
    """The shadow-model membership attack's AUC per method on what the attacker holds (the intercepted message;
    Local: the device; DP-FedAvg: its message at each noise level), mean ± sd over seeds, with each method's local
    accuracy in its label, one panel per dataset (notebook 05's protocol at full scale). Chance is AUC 0.5."""
    table = load_script("privacy_table")
    datasets = [d for d in PRIVACY_DATASETS if (folder / "privacy" / f"audit_{d}.csv").exists()]
    fig, axes = plt.subplots(1, len(datasets), figsize=(6.2 * len(datasets), 5.0), squeeze=False)
    for ax, ds in zip(axes[0], datasets):
        rows, _ = results.read_table(folder / "privacy", f"audit_{ds}")
        for r in rows:
            r["guess"] = r["guess"] or ""
        method = {r["name"]: r["method"] for r in rows if r["name"] != "evaluator"}
        auc = results.summarize(rows, by=("name", "view", "guess", "attack", "metric"))
        util = results.summarize(rows, by=("name", "metric"), metric="mean_local_acc")
        bars, seeds = [], 0
        for name, m in method.items():
            view, guess = audit.headline_target(m)
            a, u = auc.get((name, view, guess, "shadow", "auc")), util.get((name, "mean_local_acc"))
            if a and u and a["mean"] is not None and u["mean"] is not None:
                seeds = max(seeds, a["n"])
                bars.append((a["mean"], a["sd"] or 0.0, f"{name} (local acc {u['mean']:.1f} %)", m))
        bars.sort()
        y = np.arange(len(bars))
        colours = ["C3" if m == "dp_fedavg" else "C1" if m == "local" else "C0" for *_, m in bars]
        ax.barh(y, [b[0] - 0.5 for b in bars], left=0.5, xerr=[b[1] for b in bars], color=colours, alpha=0.8, capsize=2)
        ax.set_yticks(y, [b[2] for b in bars], fontsize=7)
        ax.axvline(0.5, color="0.3", ls="--", lw=1)
        ax.set(xlabel="membership-inference AUC (shadow models; 0.5 = guessing)", xlim=(0.45, 0.65))
        ax.set_title(f"{ds}, {seeds} seeds", fontsize=9)
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle("Privacy audit at full scale: no shared model leaks much membership here (WAFFLe's Table 3: 84 % "
                 "attack accuracy on FedAvg, 56 % on WAFFLe, CIFAR-10)\nattacked: the message a client sends (blue), Local's "
                 "device (orange), DP-FedAvg's message at noise z (red); mean ± sd over seeds", fontsize=9)
    fig.tight_layout()
    return fig


FIGURES = {   # name: (drawing, the tables it reads under results/)
    "gma_table10.png": (gma_table10, ["gma/table10"]),
    "gma_ablations.png": (gma_ablations, ["gma/ablations_full"]),
    "gma_tables2_3.png": (gma_tables2_3, ["gma/tables2_3"]),
    "waffle_ibp_table1.png": (waffle_ibp_table1, ["waffle_ibp/tables1_2"]),
    "waffle_ibp_epochs.png": (waffle_ibp_epochs, ["waffle_ibp/ablations"]),
    "waffle_weighted_table1.png": (waffle_weighted_table1, ["waffle_weighted/table1"]),
    "waffle_weighted_collapse.png": (waffle_weighted_collapse, ["waffle_weighted/table1_curves"]),
    "privacy_audit.png": (privacy_audit, [f"privacy/audit_{d}" for d in PRIVACY_DATASETS]),
}


def sources(tables: list[str], folder: Path) -> list[Path]:
    return [folder / f"{t}.{ext}" for t in tables for ext in ("csv", "json")]


def stale(folder: Path, out: Path) -> list[str]:
    """The figures whose recorded tables differ from ``folder``'s, or whose drawing code has changed since (or that
    are missing), with why."""
    from PIL import Image
    bad, code = [], code_fingerprint()
    for name, (_, tables) in FIGURES.items():
        path = out / name
        if not path.exists():
            bad.append(f"{name}: missing")
            continue
        text = Image.open(path).text
        got, want = text.get("Source", ""), fingerprint(sources(tables, folder), folder)
        if got != want:
            bad.append(f"{name}: drawn from {got or 'unrecorded tables'}; results/ now holds {want}")
        elif text.get("Code", "") != code:
            bad.append(f"{name}: drawn by {text.get('Code') or 'unrecorded code'}; the drawing code is now {code}")
    return bad


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true",
                    help="change nothing; exit 1 if a figure lags results/ or the drawing code")
    ap.add_argument("--results", default=str(results.RESULTS_DIR), help="the results folder (default: results/)")
    ap.add_argument("--out", default=str(OUT), help="where the PNGs go (default: docs/figures/)")
    a = ap.parse_args(argv)
    folder, out = Path(a.results), Path(a.out)
    if a.check:
        bad = stale(folder, out)
        for line in bad:
            print(line)
        if bad:
            print("redraw with: python scripts/readme_figures.py (then look at them and commit)")
        return 1 if bad else 0
    out.mkdir(parents=True, exist_ok=True)
    for name, (draw, tables) in FIGURES.items():
        missing = [p for p in sources(tables, folder) if not p.exists()]
        if missing:
            sys.exit(f"{name}: needs {', '.join(map(str, missing))}")
        fig = draw(folder)
        tmp = out / f".{name}.tmp.png"
        fig.savefig(tmp, dpi=90, metadata={"Source": fingerprint(sources(tables, folder), folder),
                                           "Code": code_fingerprint(), "Software": None})
        plt.close(fig)
        tmp.replace(out / name)   # atomic: a reader never sees half a PNG
        print(f"wrote {out / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
