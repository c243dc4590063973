"""Do WAFFLe's private selections still personalize after many local epochs? (Tables 6-7)

Notebook 02 found WAFFLe's lead over FedAvg shrinking as the local epochs E grow (MNIST, T = 50), and
with it the gap between a client's accuracy on its own test data and the global model's. Its reading
was that at large E the shared dictionary takes up each client's local fit, so the private factor
selections stop carrying anything client-specific. This script tests that on the finished Table 6-7
sweeps themselves: their checkpoints keep each client's private state (``clients/<k>.pt``), so nothing
is retrained. For every client of every seed it scores the trained dictionary on the client's own
test data with

    own             its own selection (what the table reports as local accuracy)
    prior_mean      the IBP prior mean, the selection every unseen client gets
    swap_disjoint   the selection of a random client that holds none of its classes
    swap_same       the selection of a random client that holds the same two classes
                    (only clients that have such a partner; ``own_same`` is their own-selection score)

and it compares the active factor sets (q(b) > 0.5) of client pairs: Jaccard overlap for pairs with
the same classes, one class in common, and none; ``prior_distance`` is the mean |q(b_k = 1) - E[pi_k]| of the
seen clients, how far training moved the selections from the IBP prior. If the selections carry the local fit, ``own`` beats
``swap_disjoint`` by a wide margin and same-class pairs overlap more than disjoint ones.

    python scripts/waffle_ibp_epochs_probe.py --sweeps /tmp/wt21d/runs/paper /tmp/wt21a/runs/paper \\
        /tmp/wt22a/runs/paper       # every finished WAFFLe sweep of Tables 6-7 found there
    python scripts/waffle_ibp_epochs_probe.py --sweeps runs/paper --no-write

Needs the full MNIST (FLTUTOR_DATA) the sweeps were trained on, and the same training code (a sweep whose
checkpoint was made by other code is reported and skipped). Rows go to results/waffle_ibp/epochs_probe.csv
(+ .json), one per (mode, E, seed, group, metric).
"""
from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path

import numpy as np
import torch

from fltutor import data as fdata
from fltutor import results
from fltutor.checkpoint import CheckpointError
from fltutor.federation import Federation
from fltutor.methods.waffle_ibp import selection_of
from fltutor.scenarios import waffle_ibp_data

MODES = ("unimodal", "multimodal")
RELATIONS = ("same", "one", "none")
CHOICES = ("kl_weight", "selection_optimizer", "selection_lr", "alpha_ratio")   # the open choices a row is told apart by


def class_sets(fed) -> list[frozenset]:
    """The classes each client trains on."""
    return [frozenset(np.unique(fed.y[torch.as_tensor(t, dtype=torch.long)].numpy()).tolist()) for t in fed.train]


def relation(a: frozenset, b: frozenset) -> str:
    """'same' (the same class set), 'one' (some but not all classes shared) or 'none' (disjoint)."""
    return "same" if a == b else "one" if a & b else "none"


def partners(classes: list[frozenset], wanted: str, rng: np.random.Generator) -> np.ndarray:
    """For each client, a random other client in relation ``wanted`` to it ('same' or 'none'); -1 where
    there is none."""
    out = np.full(len(classes), -1)
    for i, c in enumerate(classes):
        pool = [j for j, d in enumerate(classes) if j != i and relation(c, d) == wanted]
        if pool:
            out[i] = rng.choice(pool)
    return out


def jaccard_by_relation(active: np.ndarray, classes: list[frozenset]) -> dict[str, tuple[float, int]]:
    """Mean Jaccard overlap |A_i & A_j| / |A_i | A_j| of the active sets (active: (N, F) bool) over client pairs,
    per relation of their class sets: {relation: (mean, pairs)}; two empty sets count as overlap 1."""
    acc = {r: [] for r in RELATIONS}
    for i, j in itertools.combinations(range(len(classes)), 2):
        union = int((active[i] | active[j]).sum())
        acc[relation(classes[i], classes[j])].append(int((active[i] & active[j]).sum()) / union if union else 1.0)
    return {r: (float(np.mean(v)) if v else float("nan"), len(v)) for r, v in acc.items()}


def scored_with(fed: Federation, i: int, donor: np.ndarray) -> np.ndarray:
    """Run i's clients scored on their own test data with client donor[k]'s selection (and seen flag); the
    private state is put back afterwards."""
    saved = {k: v[i].clone() for k, v in fed.private.items()}
    seen = fed.seen[i].clone()
    idx = torch.as_tensor(donor, device=seen.device)
    try:
        for k, v in fed.private.items():
            v[i] = saved[k][idx]
        fed.seen[i] = seen[idx]
        return fed.local_accuracy(i)
    finally:
        for k, v in fed.private.items():
            v[i] = saved[k]
        fed.seen[i] = seen


def probe_run(fed: Federation, i: int, fed_data, seed: int) -> dict:
    """The numbers above for run i of a restored WAFFLe sweep: {"acc": {group: {metric: value}}, "overlap": ...}."""
    classes = class_sets(fed_data)
    n = len(classes)
    rng = np.random.default_rng(seed)
    ident = np.arange(n)
    own = fed.local_accuracy(i)
    dis, same = partners(classes, "none", rng), partners(classes, "same", rng)
    acc_dis = scored_with(fed, i, np.where(dis >= 0, dis, ident))
    acc_same = scored_with(fed, i, np.where(same >= 0, same, ident))
    seen = fed.seen[i].clone()
    fed.seen[i] = False                      # every client scored as unseen: the prior mean selection
    try:
        acc_prior = fed.local_accuracy(i)
    finally:
        fed.seen[i] = seen
    groups = {"all": np.ones(n, bool)}
    if fed_data.groups is not None:
        g = np.asarray(fed_data.groups)
        groups.update({name: g == k for k, name in enumerate(fed_data.group_names)})
    acc = {}
    for name, m in groups.items():
        has_dis, has_same = m & (dis >= 0), m & (same >= 0)
        acc[name] = {"own": float(own[m].mean()), "prior_mean": float(acc_prior[m].mean()),
                     "swap_disjoint": float(acc_dis[has_dis].mean()) if has_dis.any() else float("nan"),
                     "own_same": float(own[has_same].mean()) if has_same.any() else float("nan"),
                     "swap_same": float(acc_same[has_same].mean()) if has_same.any() else float("nan"),
                     "clients_with_same": int(has_same.sum())}
    method = fed.methods[i]
    sel = selection_of({k: v[i] for k, v in fed.private.items()}, "ibp", method.widths)
    prior = method.unseen_selection(next(iter(sel.values())))
    overlap = {}
    for layer, b in sel.items():
        on = seen.cpu().numpy()
        active = (b > 0.5).cpu().numpy()[on]
        cls = [c for c, s in zip(classes, on) if s]
        j = jaccard_by_relation(active, cls)
        overlap[layer] = {**{f"jaccard_{r}": j[r][0] for r in RELATIONS},
                          **{f"pairs_{r}": j[r][1] for r in RELATIONS}, "active": float(active.sum(1).mean()),
                          # how far the selections sit from the prior: mean |q(b_k = 1) - E[pi_k]| over factors
                          "prior_distance": float((b[seen] - prior[layer]).abs().mean())}
    return {"acc": acc, "overlap": overlap}


def find_sweeps(roots: list[str]) -> list[tuple[Path, list[dict]]]:
    """Every finished weight-factorization WAFFLe sweep under roots (a runs root or a sweep folder)."""
    found = []
    for root in roots:
        root = Path(root)
        dirs = [root] if (root / "checkpoint.json").exists() else sorted((root / "sweeps").glob("*/"))
        for d in dirs:
            files = sorted(d.glob("results-*.json"), key=lambda p: int(p.stem.split("-")[1])) or sorted(d.glob("results.json"))
            if not files or not (d / "checkpoint.json").exists():
                continue
            res = [json.loads(f.read_text()) for f in files]
            if res[0]["method"] != "waffle_ibp" or any(r["rounds_done"] < r["settings"]["rounds"] for r in res):
                continue
            found.append((d, res))
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sweeps", nargs="+", required=True, help="runs roots (with sweeps/) or sweep folders")
    ap.add_argument("--dataset", default="mnist", help="the sweeps' dataset (others found are skipped)")
    ap.add_argument("--rounds", type=int, default=50, help="only sweeps of this T (Tables 6-7: 50)")
    ap.add_argument("--no-write", action="store_true", help="print only; do not touch results/")
    a = ap.parse_args()
    t0 = time.time()
    train, test = fdata.load(a.dataset, train=True), fdata.load(a.dataset, train=False)
    datas = {}
    rows = []
    for d, res in find_sweeps(a.sweeps):
        s0 = res[0]["settings"]
        if s0["rounds"] != a.rounds:
            continue
        seeds = [r["settings"]["seed"] for r in res]
        mode = None
        for m in MODES:
            key = (m, seeds[0])
            if key not in datas:
                datas[key] = waffle_ibp_data(a.dataset, m, seed=seeds[0], train_set=train, test_set=test)
            if datas[key].fingerprint == res[0]["data_fingerprint"]:
                mode = m
        if mode is None:
            print(f"{d}: not {a.dataset} unimodal or multimodal at the paper's groups; skipped")
            continue
        feds = []
        for s in seeds:
            if (mode, s) not in datas:
                datas[mode, s] = waffle_ibp_data(a.dataset, mode, seed=s, train_set=train, test_set=test)
            feds.append(datas[mode, s])
        common = {k: v for k, v in s0.items() if k != "seed"}
        try:
            fed = Federation(res[0]["model"], feds, "waffle_ibp", runs=[{"seed": s} for s in seeds], out_dir=d,
                             progress=False, **common)
        except CheckpointError as e:
            print(f"{d}: its checkpoint does not match this code and data ({e}); skipped")
            continue
        if fed.round != s0["rounds"]:
            print(f"{d}: restored at round {fed.round} of {s0['rounds']}; skipped")
            continue
        E = s0["local_epochs"]
        for i, s in enumerate(seeds):
            got = probe_run(fed, i, feds[i], s)
            ids = {"dataset": a.dataset, "mode": mode, "method": "waffle_ibp", "rounds": s0["rounds"],
                   "local_epochs": E, "lr": s0["lr"], **{k: s0[k] for k in CHOICES}, "seed": s}
            for group, vals in got["acc"].items():
                rows += [{**ids, "group": group, "metric": k, "value": round(v, 4)} for k, v in vals.items()]
            for layer, vals in got["overlap"].items():
                rows += [{**ids, "group": "all", "metric": f"{k}_{layer}", "value": round(v, 4)} for k, v in vals.items()]
            al = got["acc"]["all"]
            ov = next(iter(got["overlap"].values()))
            print(f"{mode:10s} E={E:2d} seed {s}: own {al['own']:.2f}  prior mean {al['prior_mean']:.2f}  "
                  f"swap disjoint {al['swap_disjoint']:.2f}  own/swap same {al['own_same']:.2f}/{al['swap_same']:.2f}"
                  f"  | Jaccard same/one/none {ov['jaccard_same']:.3f}/{ov['jaccard_one']:.3f}/{ov['jaccard_none']:.3f}"
                  f"  active {ov['active']:.1f}")
        del fed
    if not rows:
        raise SystemExit(f"no finished WAFFLe sweep of T={a.rounds} on {a.dataset} under {a.sweeps}")
    if not a.no_write:
        meta = results.provenance(wall_s=time.time() - t0,
                                  note="analysis of finished Table 6-7 sweeps' checkpoints; nothing retrained")
        for p in results.write_table(Path(results.RESULTS_DIR) / "waffle_ibp", "epochs_probe", rows, meta, merge=True):
            print("wrote", p)


if __name__ == "__main__":
    main()
