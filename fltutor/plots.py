"""Figures a reader would rather look at than read: partitions, learning curves, fairness, privacy."""
from __future__ import annotations

import os
import textwrap
from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import FancyBboxPatch, Patch
from matplotlib.ticker import MaxNLocator

from . import methods
from .partition import class_counts
from .results import algorithm_name, momentum_of

__all__ = ["plot_partition", "plot_learning_curves", "plot_client_accuracy", "interact",
           "threat_rows", "plot_threat_model", "plot_roc", "plot_privacy_utility", "plot_image_grid",
           "plot_lr_grid", "table10_grids", "plot_table10_results", "gma_tables2_3_leads", "plot_gma_tables2_3"]


def plot_partition(labels, parts, *, class_names: Sequence[str] | None = None, groups=None,
                   title: str = "", ax=None, max_clients: int = 120):
    """Clients x classes heatmap of sample counts; ``groups`` draws lines between subpopulations."""
    counts = class_counts(labels, parts, len(class_names) if class_names else None)[:max_clients]  # (N, K)
    ax = ax or plt.subplots(figsize=(4, 5))[1]
    im = ax.imshow(counts, aspect="auto", cmap="viridis", interpolation="nearest", vmin=0)  # 0 = no data
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("class")
    ax.set_ylabel("client")
    if class_names:
        ax.set_xticks(range(len(class_names)))
        ax.set_xticklabels(class_names, rotation=90, fontsize=7)
    if groups is not None:
        g = np.asarray(groups)[:max_clients]
        for b in np.flatnonzero(np.diff(g)) + 0.5:
            ax.axhline(b, color="white", lw=1.5, ls="--")
    ax.set_title(title or f"{len(parts)} clients")
    plt.colorbar(im, ax=ax, label="samples")
    return ax


def plot_learning_curves(runs: dict, *, key: str = "local_acc", ax=None, groups=None, ylabel=None):
    """Accuracy against round for several runs ({label: results dict}).

    With ``groups``, each run is split into majority (solid) and minority (dashed) curves.
    """
    ax = ax or plt.subplots(figsize=(5, 3.2))[1]
    for i, (label, res) in enumerate(runs.items()):
        hist = [h for h in res["history"] if key in h]
        rounds = [h["round"] for h in hist]
        color = f"C{i}"
        if groups is None:
            ax.plot(rounds, [h[key] for h in hist], color=color, label=label)
        else:
            per = np.array([h["local_acc_per_client"] for h in hist])  # (T, N)
            g = np.asarray(groups)
            ax.plot(rounds, per[:, g == 0].mean(1), color=color, label=f"{label} majority")
            ax.plot(rounds, per[:, g == 1].mean(1), color=color, ls="--", label=f"{label} minority")
    ax.set_xlabel("round")
    ax.set_ylabel(ylabel or ("local test accuracy (%)" if key == "local_acc" else key))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return ax


def plot_client_accuracy(per_client: dict, groups, *, group_names=("majority", "minority"), ax=None,
                         bins=None):
    """Histograms of final per-client accuracy, one colour per subpopulation (WAFFLe Fig. 3)."""
    g = np.asarray(groups)
    n = len(per_client)
    fig, axes = (None, ax) if ax is not None else plt.subplots(1, n, figsize=(3.2 * n, 2.6), sharey=True, squeeze=False)
    axes = np.atleast_1d(axes).ravel()
    bins = np.linspace(0, 100, 21) if bins is None else bins
    for a, (label, acc) in zip(axes, per_client.items()):
        acc = np.asarray(acc)
        for gid, name in enumerate(group_names):
            a.hist(acc[g == gid], bins=bins, alpha=0.6, label=f"{name} (n={int((g == gid).sum())})")
        a.set_title(label, fontsize=9)
        a.set_xlabel("local test accuracy (%)")
    axes[0].set_ylabel("clients")
    axes[0].legend(fontsize=7)
    return axes


def interact(fn, **controls):
    """``ipywidgets.interact(fn, **controls)`` in a live notebook; one call of ``fn()`` when headless.

    Headless runs (``python -m fltutor run``, ``pytest --nbval-lax``) set FLTUTOR_HEADLESS=1:
    live widgets there can deadlock the executing client at random (jupyter/nbclient#312,
    nteract/papermill#723), and nobody can move a slider anyway. The default view is drawn
    instead, so the executed notebook still shows it.
    """
    if os.environ.get("FLTUTOR_HEADLESS"):
        return fn()
    import ipywidgets

    return ipywidgets.interact(fn, **controls)


# ---- privacy audit (notebook 05) ----------------------------------------------------------------

def _np(a) -> np.ndarray:
    """A float numpy copy of a number, list, numpy array or (any-device) torch tensor."""
    if hasattr(a, "detach"):
        a = a.detach().cpu().numpy()
    return np.asarray(a, dtype=float)


# how much of a client's model one intercepted message (and a breached server) exposes
EXPOSURE_COLORS = {"whole model": "#f4a6a6", "partial": "#fdd49e", "noised": "#d4c8e8", "nothing": "#b9e3b9"}
_CLIENT_COLOR = "#e4ebf5"  # the client column: what never leaves it


def threat_rows(names: Sequence[str] | None = None) -> list[dict]:
    """The threat-model rows of ``plot_threat_model``, read from each method's class attributes.

    ``names`` None: every registered method. Exposure comes from the table below (a judgement
    about what the message reveals of the client's model); methods not in it send it whole.
    """
    # (message, server): DP-FedAvg's noise is added on the server, so its message is exposed whole
    exposure = {"local": ("nothing", "nothing"), "fedper": ("partial", "partial"),
                "waffle_ibp": ("partial", "partial"), "waffle_ibp_l1": ("partial", "partial"),
                "dp_fedavg": ("whole model", "noised")}
    rows = []
    for name in methods.names() if names is None else names:
        cls, _ = methods.get(name)  # an unknown name raises, naming the registered ones
        msg, srv = exposure.get(name, ("whole model", "whole model"))
        rows.append({"method": name, "message": cls.message_holds, "client": cls.client_keeps,
                     "server": cls.server_holds, "exposure": msg, "server_exposure": srv})
    return rows


def plot_threat_model(rows: Sequence[dict], ax=None, *, width: int = 30):
    """The threat model as a table of boxes: one row per method, coloured by how much is exposed.

    ``rows``: dicts {"method", "message", "client", "server", "exposure"} (``threat_rows()``),
    exposure one of ``EXPOSURE_COLORS``, and optionally "server_exposure" for the server box (default: the
    same). The message and server boxes take the exposure's colour;
    the client box is neutral. ``width``: characters per wrapped line.
    """
    columns = [("message", "one intercepted message"), ("client", "stays on the client"),
               ("server", "a breached server holds")]
    cells = []
    for i, row in enumerate(rows):
        missing = {"method", "exposure", *(k for k, _ in columns)} - set(row)
        if missing:
            raise ValueError(f"rows[{i}]: missing {sorted(missing)}; each row needs method, message, client, "
                             "server and exposure (threat_rows() builds them)")
        for key in ("exposure", "server_exposure"):
            if key in row and row[key] not in EXPOSURE_COLORS:
                raise ValueError(f"rows[{i}]['{key}']: {row[key]!r} is not one of {list(EXPOSURE_COLORS)}")
        cells.append([textwrap.fill(str(row[k]), width) for k, _ in columns])
    if not cells:
        raise ValueError("rows: empty; pass at least one method's row (threat_rows() builds them)")
    heights = [max(c.count("\n") for c in cs) + 2 for cs in cells]  # in text lines, one line of padding
    label_w, cell_w, header = 1.0, 2.2, 2.0                          # x in cell units, y in text lines
    if ax is None:
        ax = plt.subplots(figsize=(label_w + 3 * cell_w + 1.2 + 0.6, 0.17 * (sum(heights) + header + 3)))[1]
    for j, (_, title) in enumerate(columns):
        ax.text(label_w + (j + 0.5) * cell_w, header / 2, title, ha="center", va="center",
                fontsize=9, fontweight="bold")
    top = header
    for row, cs, h in zip(rows, cells, heights):
        ax.text(label_w - 0.08, top + h / 2, row["method"], ha="right", va="center", fontsize=9)
        for j, text in enumerate(cs):
            kind = row.get("server_exposure", row["exposure"]) if columns[j][0] == "server" else row["exposure"]
            color = _CLIENT_COLOR if columns[j][0] == "client" else EXPOSURE_COLORS[kind]
            x0 = label_w + j * cell_w
            ax.add_patch(FancyBboxPatch((x0 + 0.04, top + 0.15), cell_w - 0.08, h - 0.3,
                                        boxstyle="round,pad=0,rounding_size=0.05", fc=color, ec="0.6", lw=0.6,
                                        mutation_aspect=1 / 0.17))
            ax.text(x0 + cell_w / 2, top + h / 2, text, ha="center", va="center", fontsize=7.5, linespacing=1.1)
        top += h
    ax.set_xlim(0, label_w + 3 * cell_w)
    ax.set_ylim(top, 0)  # first method on top
    ax.axis("off")
    handles = [Patch(fc=c, ec="0.6", label=k) for k, c in EXPOSURE_COLORS.items()]
    handles.append(Patch(fc=_CLIENT_COLOR, ec="0.6", label="private to the client"))
    ax.legend(handles=handles, title="exposure", loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7,
              title_fontsize=8, frameon=False)
    return ax


def plot_roc(curves: dict, ax=None, log: bool = True, *, floor: float | None = None):
    """ROC curves ({label: (fpr, tpr) or (fpr, tpr, auc)}), log-log by default (Carlini et al. 2022).

    On log axes FPR and TPR are clipped to ``floor`` (default: 1e-3 or the smallest positive FPR,
    whichever is lower), so points at 0, like the curve's start (0, 0), are drawn on the lower edge.
    Dotted guides mark FPR 1% and 0.1%. ``log=False``: linear axes from 0 to 1, nothing clipped.
    """
    data = {}
    for label, curve in curves.items():
        if len(curve) not in (2, 3):
            raise ValueError(f"curves[{label!r}]: expected (fpr, tpr) or (fpr, tpr, auc), got {len(curve)} items")
        fpr, tpr = _np(curve[0]).ravel(), _np(curve[1]).ravel()
        if fpr.shape != tpr.shape:
            raise ValueError(f"curves[{label!r}]: fpr has {fpr.size} points but tpr {tpr.size}; pass roc_curve's pair")
        data[label] = (fpr, tpr, curve[2] if len(curve) == 3 else None)
    if floor is None:
        positive = [f[f > 0].min() for f, _, _ in data.values() if (f > 0).any()]
        floor = min([1e-3, *positive])
    if not 0 < floor < 1:
        raise ValueError(f"floor: {floor} must lie in (0, 1); it is the lower edge of the log axes")
    lo = floor if log else 0.0
    ax = ax or plt.subplots(figsize=(4.2, 4))[1]
    for label, (fpr, tpr, area) in data.items():
        if log:
            fpr, tpr = np.clip(fpr, floor, 1), np.clip(tpr, floor, 1)
        ax.plot(fpr, tpr, lw=1.5, label=label if area is None else f"{label} (AUC {float(area):.3f})")
    ax.plot([lo, 1], [lo, 1], color="0.5", ls="--", lw=1, label="chance")
    if log:
        ax.set_xscale("log")
        ax.set_yscale("log")
        for f in (1e-2, 1e-3):
            if f >= floor:
                ax.axvline(f, color="0.4", ls=":", lw=0.8)
                ax.text(f, 0.02, f" {f:.1%} FPR".replace(".0%", "%"), transform=ax.get_xaxis_transform(),
                        fontsize=7, color="0.3", va="bottom", rotation=90)
    ax.set_xlim(lo, 1)
    ax.set_ylim(lo, 1)
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate")
    ax.grid(alpha=0.3, which="major")
    ax.legend(fontsize=7, loc="lower right")
    return ax


_AXIS_LABELS = {"local_acc": "local test accuracy (%)", "global_acc": "global test accuracy (%)",
                "auc": "membership-inference AUC", "attack_acc": "attack accuracy (%)"}


def plot_privacy_utility(rows: Sequence[dict], ax=None, x: str = "local_acc", y: str = "auc", *,
                         chance: float | None = 0.5):
    """Privacy against utility: one labelled point per row, "<key>_sd" as error bars, chance as a line.

    ``rows``: dicts with "method", ``x`` and ``y`` (means), optional ``x_sd``/``y_sd`` spreads,
    "label" (default: the method) and "group": rows of one group (one method at several noise
    levels, labelled "eps=..") share a colour and are joined in order of x. ``chance``: the
    y of a guessing attacker (0.5 for AUC; None draws no line).
    """
    for i, row in enumerate(rows):
        missing = {"method", x, y} - set(row)
        if missing:
            raise ValueError(f"rows[{i}]: missing {sorted(missing)}; each row needs 'method', {x!r} and {y!r}")
    ax = ax or plt.subplots(figsize=(5, 3.6))[1]
    colors: dict = {}  # one colour per group, or per method outside groups
    for row in rows:
        key = ("group", row["group"]) if row.get("group") is not None else ("method", row["method"])
        color = colors.setdefault(key, f"C{len(colors) % 10}")
        xv, yv = float(_np(row[x])), float(_np(row[y]))
        xerr, yerr = row.get(f"{x}_sd"), row.get(f"{y}_sd")
        ax.errorbar(xv, yv, xerr=None if xerr is None else float(_np(xerr)),
                    yerr=None if yerr is None else float(_np(yerr)),
                    fmt="o", color=color, ms=5, capsize=2, lw=1)
        ax.annotate(str(row.get("label", row["method"])), (xv, yv), xytext=(4, 4), textcoords="offset points",
                    fontsize=7)
    for (kind, group), color in colors.items():
        if kind != "group":
            continue
        pts = sorted((float(_np(r[x])), float(_np(r[y]))) for r in rows if r.get("group") == group)
        ax.plot(*zip(*pts), color=color, lw=1, alpha=0.7, label=str(group))
    if chance is not None:
        ax.axhline(chance, color="0.5", ls="--", lw=1, label="chance")
    ax.margins(0.1)  # room for the point labels
    ax.set_xlabel(_AXIS_LABELS.get(x, x))
    ax.set_ylabel(_AXIS_LABELS.get(y, y))
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)
    return ax


def plot_image_grid(images, row_labels: Sequence[str] | None = None, col_labels: Sequence[str] | None = None,
                    axes=None, cmap: str = "gray"):
    """A grid of images without ticks, e.g. rows = methods, columns = classes (WAFFLe Fig. 6).

    ``images``: (R, C, H, W), (R, C, 1, H, W) or (R, C, 3, H, W), array or tensor; values are
    clipped to [0, 1] and NaN pixels (a whole NaN image: a missing cell) are left blank.
    ``axes``: R x C axes to draw into. Returns the (R, C) array of axes.
    """
    a = _np(images)
    if a.ndim == 5 and a.shape[2] in (1, 3):
        a = a[:, :, 0] if a.shape[2] == 1 else np.moveaxis(a, 2, -1)  # (R, C, H, W) or (R, C, H, W, 3)
    elif a.ndim != 4:
        raise ValueError(f"images: expected shape (R, C, H, W), (R, C, 1, H, W) or (R, C, 3, H, W), got "
                         f"{tuple(_np(images).shape)}; for a single row add a leading axis (images[None])")
    R, C = a.shape[:2]
    for name, labels, n in (("row_labels", row_labels, R), ("col_labels", col_labels, C)):
        if labels is not None and len(labels) != n:
            raise ValueError(f"{name}: {len(labels)} labels for {n} {name[:3]}s of images")
    if axes is None:
        axes = plt.subplots(R, C, figsize=(1.1 * C + 0.8, 1.1 * R + 0.3), squeeze=False)[1]
    axes = np.asarray(axes, dtype=object)
    if axes.size != R * C:
        raise ValueError(f"axes: {axes.size} axes for a {R} x {C} grid of images")
    axes = axes.reshape(R, C)
    a = np.clip(a, 0, 1)  # keeps NaN
    for r in range(R):
        for c in range(C):
            ax, img = axes[r, c], a[r, c]
            if img.ndim == 3:  # RGB: NaN pixels transparent
                nan = np.isnan(img).any(-1, keepdims=True)
                img = np.concatenate([np.nan_to_num(img), (~nan).astype(float)], -1)  # (H, W, 4)
                ax.imshow(img, interpolation="nearest")
            else:
                ax.imshow(np.ma.masked_invalid(img), cmap=cmap, vmin=0, vmax=1, interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            for s in ax.spines.values():
                s.set_visible(False)
            if r == 0 and col_labels is not None:
                ax.set_title(str(col_labels[c]), fontsize=8)
            if c == 0 and row_labels is not None:
                ax.set_ylabel(str(row_labels[r]), fontsize=8, rotation=0, ha="right", va="center")
    return axes


def plot_lr_grid(panels: dict, client_lrs: Sequence[float], server_lrs: Sequence[float], *, axes=None,
                 diff_keys: Sequence[str] = (), fmt: str = "{:.1f}", xlabel: str = "client rate $\\eta_l$",
                 ylabel: str = "server rate $\\eta_g$", marks: dict | None = None, diff_limit: float | None = None,
                 value_limits: tuple[float, float] = (0.0, 100.0), notes: dict | None = None):
    """Annotated heatmaps of accuracy over server rate (rows) x client rate (columns), one per panel.

    ``panels``: {title: (S, L) array} with NaN for a run that diverged or was not run (drawn as a hatched
    "—"). Panels named in ``diff_keys`` are differences: a red-blue map centred on 0; the others share
    one 0-100 % scale, so two panels read alike. Any other pair of settings can be drawn by naming the
    axes (``xlabel``, ``ylabel``); ``marks`` {title: (S, L) bool array} outlines chosen cells in red.
    ``diff_limit`` fixes the difference panels' scale at ±diff_limit (default: each panel's largest |value|),
    so panels drawn in separate calls read alike. ``value_limits`` is the other panels' scale (default 0-100 %):
    narrow it, say to (90, 100), when every cell is near the top and 0-100 would paint them one colour.
    ``notes`` {title: (S, L) array of str}: a non-empty string is written in that cell instead of its value,
    e.g. "diverged" for a cell whose runs blew up, so it reads apart from a cell that was not run ("—").
    """
    n = len(panels)
    if axes is None:
        axes = plt.subplots(1, n, figsize=(3.4 * n, 0.55 * len(server_lrs) + 1.6), squeeze=False)[1][0]
    for ax, (title, grid) in zip(axes, panels.items()):
        a = np.asarray(grid, dtype=float)                                                  # (S, L)
        if a.shape != (len(server_lrs), len(client_lrs)):
            raise ValueError(f"plot_lr_grid: panel {title!r} has shape {a.shape}; expected "
                             f"({len(server_lrs)} server rates, {len(client_lrs)} client rates)")
        diff = title in diff_keys
        lim = (float(diff_limit) if diff_limit is not None else
               max(1.0, float(np.nanmax(np.abs(a)))) if diff and np.isfinite(a).any() else 1.0)
        lo, hi = (float(v) for v in value_limits)
        im = ax.imshow(np.ma.masked_invalid(a), cmap="RdBu" if diff else "viridis", aspect="auto",
                       vmin=-lim if diff else lo, vmax=lim if diff else hi)
        ax.set_facecolor("0.85")
        for (i, j), v in np.ndenumerate(a):
            note = (notes or {}).get(title)
            note = "" if note is None else str(np.asarray(note, dtype=object)[i, j] or "")
            text = note or ("—" if not np.isfinite(v) else (("{:+.1f}" if diff else fmt).format(v)))
            light = diff and np.isfinite(v) and abs(v) > 0.6 * lim or (not diff and np.isfinite(v) and v < lo + 0.55 * (hi - lo))
            ax.text(j, i, text, ha="center", va="center", fontsize=8, color="w" if light else "k")
        ax.set_xticks(range(len(client_lrs)), [f"{v:g}" for v in client_lrs])
        ax.set_yticks(range(len(server_lrs)), [f"{v:g}" for v in server_lrs])
        for (i, j), on in np.ndenumerate(np.asarray((marks or {}).get(title, np.zeros(a.shape, bool)))):
            if on:
                ax.add_patch(plt.Rectangle((j - 0.48, i - 0.48), 0.96, 0.96, fill=False, ec="C3", lw=2))
        ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
        plt.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    return axes


def table10_grids(rows: Sequence[dict], momentum: float = 0.9) -> dict:
    """GMA's Table 10 from results/gma/table10.csv's rows at one client momentum and the longest runs there:
    {"rounds": R, "AVG"/"GMA": (server rates x client rates) mean best test accuracy over the seeds (NaN where
    none ran or a run diverged), "notes": {"AVG"/"GMA": the text of each cell, "N seeds" or "diverged k/n
    seeds"}}; the grid's axes are the paper's (paper_tables.GMA_TABLE10_*). A cell where any seed diverged is
    never averaged over the seeds that did not."""
    from .paper_tables import GMA_TABLE10_CLIENT_LRS as L, GMA_TABLE10_SERVER_LRS as S
    rows = [r for r in rows if (0.9 if r.get("momentum") is None else float(r["momentum"])) == momentum]
    rounds = max((int(r["rounds"]) for r in rows), default=0)
    out = {"rounds": rounds, "notes": {}}
    for agg in ("AVG", "GMA"):
        acc, note = np.full((len(S), len(L)), np.nan), np.full((len(S), len(L)), "", dtype=object)
        for i, g in enumerate(S):
            for j, lr in enumerate(L):
                one = [r for r in rows if r["aggregation"] == agg and float(r["server_lr"]) == g and float(r["lr"]) == lr
                       and int(r["rounds"]) == rounds]
                vals = [float(r["value"]) for r in one if r["metric"] == "best_global_acc" and r["value"] is not None]
                div = [r for r in one if r["metric"] == "diverged_round" and r["value"] is not None]
                if div:
                    note[i, j] = f"diverged\n{len(div)}/{len(div) + len(vals)} seeds"
                elif vals:
                    acc[i, j] = float(np.mean(vals))
                    note[i, j] = f"{acc[i, j]:.1f}\n{len(vals)} seed{'s' * (len(vals) > 1)}"
        out[agg], out["notes"][agg] = acc, note
    return out


def plot_table10_results(rows: Sequence[dict], meta: dict, *, fig=None):
    """Table 10 at the paper's protocol: our AVG, GMA and GMA - AVG heatmaps (top) above the paper's (bottom), on
    one difference scale, from results/gma/table10.csv (``rows``) and its JSON (``meta``: the devices named in the
    title). Returns the figure."""
    from .paper_tables import GMA_TABLE10, GMA_TABLE10_CLIENT_LRS as L, GMA_TABLE10_SERVER_LRS as S
    g = table10_grids(rows)
    lead = g["GMA"] - g["AVG"]
    lead_notes = np.where([[str(a).startswith("diverged") or str(b).startswith("diverged") for a, b in zip(ra, rb)]
                           for ra, rb in zip(g["notes"]["AVG"], g["notes"]["GMA"])], "diverged", "")
    paper = {agg: np.array([GMA_TABLE10[agg][s] for s in S]) for agg in ("mean", "gma")}
    both = np.concatenate([lead.ravel(), (paper["gma"] - paper["mean"]).ravel()])
    lim = float(np.nanmax(np.abs(both))) if np.isfinite(both).any() else 1.0
    fig = fig or plt.figure(figsize=(13, 7.5))
    axes = fig.subplots(2, 3)
    plot_lr_grid({"ours: AVG": g["AVG"], "ours: GMA": g["GMA"], "ours: GMA − AVG": lead}, L, S, axes=axes[0],
                 diff_keys=["ours: GMA − AVG"], diff_limit=lim,
                 notes={"ours: AVG": g["notes"]["AVG"], "ours: GMA": g["notes"]["GMA"], "ours: GMA − AVG": lead_notes})
    plot_lr_grid({"paper: AVG": paper["mean"], "paper: GMA": paper["gma"], "paper: GMA − AVG": paper["gma"] - paper["mean"]},
                 L, S, axes=axes[1], diff_keys=["paper: GMA − AVG"], diff_limit=lim)
    parts = meta.get("parts") or [meta]
    devices = ", ".join(sorted({str(p.get("device", "?")).split(":")[0] for p in parts}))
    fig.suptitle(f"Table 10 at the paper's protocol ({g['rounds']} rounds, full scale): best test accuracy (%), ours (top, "
                 f"{len(parts)} commands, {devices}) and the paper's (bottom)", fontsize=10)
    fig.tight_layout()
    return fig


GMA_CHOICES = (("fixed", "one fixed pair for both", "0.55"), ("own", "each its own held-out pick", "C0"),
               ("shared", "the pair best for both together", "C2"))


def gma_tables2_3_leads(rows: Sequence[dict]) -> dict[tuple, dict[str, dict]]:
    """Tables 2-3 rows (client momentum 0.9) as {(dataset, skew, clients, algorithm): {lr_choice: {"AVG": {seed:
    best}, "GMA": {seed: best}, "pairs": {agg: (client lr, server lr)}}}}, the best test accuracy over the rounds
    (the paper's metric); a diverged run has no value and drops out of its seed's lead."""
    out: dict[tuple, dict[str, dict]] = {}
    for r in rows:
        if momentum_of(r) != 0.9 or r["metric"] != "best_global_acc":
            continue
        c = out.setdefault((r["dataset"], r["skew"], int(r["clients"]), r["algorithm"]), {}).setdefault(
            r["lr_choice"], {"AVG": {}, "GMA": {}, "pairs": {}})
        c["pairs"][r["aggregation"]] = (float(r["lr"]), float(r["server_lr"]))
        if r["value"] is not None:
            c[r["aggregation"]][r["seed"]] = float(r["value"])
    return out


def plot_gma_tables2_3(rows: Sequence[dict], meta: dict):
    """GMA's Tables 2-3 on the whole data (results/gma/tables2_3.csv). Left: GMA − AVG seed by seed (small dots),
    its mean ± sd (large), for each way the learning rates were chosen, with the paper's lead (red diamond). Right:
    AVG (open) and GMA (filled) joined, mean over seeds, beside the paper's pair (red): whether a gap is GMA doing
    worse or AVG doing better than the paper's."""
    from matplotlib.lines import Line2D
    from .paper_tables import GMA_TABLE
    leads = gma_tables2_3_leads(rows)
    short = {"label": "2-class", "iid": "iid", "quantity": "quantity", "dirichlet": "Dirichlet",
             "feature": "FedCMNIST feature", "mixed": "FedCMNIST mixed",
             "feature-shared": "FedCMNIST feature*", "mixed-shared": "FedCMNIST mixed*"}
    skews, algos = list(short), ["fedavg", "fedprox", "fedadam", "fedyogi"]
    keys = sorted(leads, key=lambda k: (skews.index(k[1]) if k[1] in skews else len(skews), k[0] != "mnist", k[0],
                                        -k[2], algos.index(k[3]) if k[3] in algos else len(algos)))

    def label(k):
        ds = "" if k[1] in ("feature", "mixed", "feature-shared", "mixed-shared") else \
            {"mnist": "MNIST ", "fashionmnist": "FMNIST "}.get(k[0], k[0] + " ")
        return f"{ds}{short.get(k[1], k[1])}, {k[2]}: {algorithm_name(k[3], meta)}"

    fig, (left, right) = plt.subplots(1, 2, figsize=(14, 0.42 * len(keys) + 2.2), sharey=True,
                                      gridspec_kw={"width_ratios": [1.25, 1]})
    offsets = {"paper": -0.3, "fixed": -0.1, "own": 0.1, "shared": 0.3}
    seeds_seen = set()
    for i, k in enumerate(keys):
        paper = GMA_TABLE.get(k[:3], {}).get(k[3])
        if paper is not None:
            y = i + offsets["paper"]
            left.scatter(paper[1] - paper[0], y, marker="D", s=28, color="C3", zorder=4)
            right.plot(paper, [y, y], color="C3", lw=1.2)
            right.scatter(paper[0], y, marker="o", s=22, facecolor="w", edgecolor="C3", zorder=4)
            right.scatter(paper[1], y, marker="o", s=22, color="C3", zorder=4)
        for choice, _, colour in GMA_CHOICES:
            c = leads[k].get(choice)
            if not c:
                continue
            y = i + offsets[choice]
            both = sorted(set(c["AVG"]) & set(c["GMA"]))
            seeds_seen |= set(both)
            d = np.array([c["GMA"][s] - c["AVG"][s] for s in both])
            if len(d):
                m, sd = float(d.mean()), float(d.std(ddof=1)) if len(d) > 1 else 0.0
                left.scatter(d, np.full(len(d), y), s=7, color=colour, alpha=0.6, zorder=2)
                left.errorbar(m, y, xerr=sd, fmt="o", ms=5, color=colour, capsize=2, zorder=3)
            a, g = (float(np.mean(list(c[agg].values()))) if c[agg] else np.nan for agg in ("AVG", "GMA"))
            right.plot([a, g], [y, y], color=colour, lw=1.2)
            right.scatter(a, y, marker="o", s=22, facecolor="w", edgecolor=colour, zorder=3)
            right.scatter(g, y, marker="o", s=22, color=colour, zorder=3)
            if choice == "own":
                pa, pg = c["pairs"].get("AVG"), c["pairs"].get("GMA")
                txt = f"{pa[0]:g}/{pa[1]:g}" if pa == pg else f"AVG {pa[0]:g}/{pa[1]:g}, GMA {pg[0]:g}/{pg[1]:g}"
                right.annotate(txt, (1.0, y), xycoords=("axes fraction", "data"), xytext=(3, 0),
                               textcoords="offset points", fontsize=6, va="center", color=colour)
    left.axvline(0, color="0.3", lw=1)
    left.set_yticks(range(len(keys)), [label(k) for k in keys], fontsize=7)
    left.invert_yaxis()
    for ax in (left, right):
        for i in range(1, len(keys)):
            ax.axhline(i - 0.5, color="0.9", lw=0.6, zorder=0)
        ax.grid(axis="x", alpha=0.3)
    left.set_xlabel("GMA − AVG, best test accuracy over the rounds (points; > 0: GMA ahead)", fontsize=8)
    right.set_xlabel("best test accuracy (%), mean over seeds: AVG open, GMA filled", fontsize=8)
    handles = [Line2D([], [], marker="D", ls="", color="C3", label="the paper (one number per cell)")] + \
        [Line2D([], [], marker="o", ls="", color=colour, label=f"ours, {words} ({choice})")
         for choice, words, colour in GMA_CHOICES]
    fig.legend(handles=handles, fontsize=7, ncol=4, loc="lower center", bbox_to_anchor=(0.5, 0.0))
    rounds = sorted({int(r["rounds"]) for r in rows})
    fig.suptitle(f"GMA's Tables 2-3 on the whole data: {len(seeds_seen)} seeds, {'/'.join(map(str, rounds))} "
                 "rounds, 10 clients sampled per round; small dots are single seeds, large ones mean ± sd\n"
                 "the own picks (client / server rate) at the right; * not a paper row: one colour map shared by the "
                 "training clients and reversed at test (coloured MNIST's construction)", fontsize=9)
    # room set by hand: tight_layout counts the picks written right of the axes and crops the row names instead
    fig.subplots_adjust(left=0.19, right=0.86, bottom=1.1 / fig.get_figheight(), top=1 - 0.75 / fig.get_figheight(),
                        wspace=0.05)
    return fig
