"""Figures a reader would rather look at than read: partitions, learning curves, fairness."""
from __future__ import annotations

import os
from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import MaxNLocator

from .partition import class_counts

__all__ = ["plot_partition", "plot_learning_curves", "plot_client_accuracy", "interact"]


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
