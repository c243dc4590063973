"""Why is the variance across clients of FedAvg, FedProx and q-FFL on multimodal FMNIST above WAFFLe's Table 1?

At 5 seeds their accuracies fit the paper's while their variance of local accuracy across the 110
clients sits 40-58 %^2 above it. This probe takes the finished multimodal cells apart (their
``results.json``; nothing is retrained) and measures four candidate causes:

    observed      the final round's population variance over clients (what Table 1 reports)
    between       its majority/minority part, sum_g w_g (mean_g - mean)^2; ``within`` is the rest
    binomial      mean over clients of p(1 - p) / n_test: the noise of scoring on a small local test set
    last5         the variance after averaging each client's accuracy over the last 5 evaluations
                  (what remains without the round-to-round wobble of the global model)
    pair_model    the variance when every client scores the mean accuracy of clients with its class set
                  (pooled over all cells read): the part that follows from which classes a client holds

The shard partition of the paper (section IV-A) deals single-class shards at random, so some clients get
two shards of one class. A client holding only Shirt is scored on shirts alone, which the global model
files under the majority's tops. ``single_class_<c>`` counts such clients per seed, and over ``--mc``
fresh partitions the script reports how many a random partition has (beside the closed form
N k_c (k_c - 1) / (S (S - 1)) for a group of N clients holding S shards, k_c of class c) and the
pair model's variance, so our five seeds can be placed among all partitions.

    FLTUTOR_DATA=/path/to/datasets python scripts/waffle_ibp_variance.py --runs runs/paper
    python scripts/waffle_ibp_variance.py --runs /tmp/wt24a/runs/paper --mc 400 --no-write

Needs the dataset's labels (FLTUTOR_DATA) to rebuild each seed's partition; a cell whose data fingerprint
differs from the rebuilt one (another minority preset) is skipped and named. Rows go to
results/waffle_ibp/variance_probe.csv (+ .json): one per (method, seed, metric), the partition rows
under method "random partition", and how single-class minority clients score under "pooled cells".
"""
from __future__ import annotations

import argparse
import collections
import json
import time
from pathlib import Path

import numpy as np

from fltutor import data as fdata
from fltutor import partition, results
from fltutor.scenarios import waffle_ibp_data


def expected_single_class(groups, shards_per_client: int = 2) -> dict[int, float]:
    """Closed form: the expected number of clients whose Z = 2 shards are both of class c."""
    if shards_per_client != 2:
        raise ValueError(f"shards_per_client={shards_per_client}: the closed form here is for Z = 2")
    out = {}
    for classes, n in groups:
        s = n * shards_per_client
        for c, k in zip(classes, partition._even_counts(s, len(classes))):
            out[int(c)] = n * k * (k - 1) / (s * (s - 1))
    return out


def class_sets(labels, parts) -> list[tuple[int, ...]]:
    """The sorted classes each client holds."""
    return [tuple(sorted(set(np.asarray(labels)[p].tolist()))) for p in parts]


def decompose(acc, groups, n_test) -> dict[str, float]:
    """Population variance of per-client accuracy (%) with its between-group, within-group and binomial parts."""
    acc, groups, n_test = np.asarray(acc, float), np.asarray(groups), np.asarray(n_test, float)
    mean = acc.mean()
    between = sum((groups == g).mean() * (acc[groups == g].mean() - mean) ** 2 for g in np.unique(groups))
    p = acc / 100
    return {"observed": float(acc.var()), "between": float(between), "within": float(acc.var() - between),
            "binomial": float(np.mean(p * (1 - p) / n_test) * 1e4)}


def pair_model_variance(sets, pair_mean: dict, default: float) -> float:
    """Variance over clients when each scores the mean accuracy of its class set (``default`` for an unseen set)."""
    return float(np.var([pair_mean.get(s, default) for s in sets]))


def read_cells(run_root: Path, dataset: str):
    """Finished multimodal cells of ``dataset``: (cell name, its results) for every results.json that ran all rounds."""
    for f in sorted((run_root / "cells").glob(f"{dataset}-multimodal-*/results.json")):
        r = json.loads(f.read_text())
        if r.get("diverged") is None and r["rounds_done"] == r["settings"]["rounds"] and r["final"].get("local_acc_per_client"):
            yield f.parent.name, r


def variant(r) -> str:
    """The setting that tells a FedProx or q-FFL row apart (as in tables1_2.csv's variant column)."""
    s = r["settings"]
    return f"mu={s['mu']:g}" if r["method"] == "fedprox" else f"q={s['q']:g}" if r["method"] == "qffl" else ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", nargs="+", default=["runs/paper"], help="run roots whose cells/ hold the finished runs")
    ap.add_argument("--dataset", default="fashionmnist")
    ap.add_argument("--methods", nargs="+", default=["fedavg", "fedprox", "qffl"])
    ap.add_argument("--mc", type=int, default=400, help="random partitions drawn (seeds 1000, 1001, ...)")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    t0 = time.time()
    groups = partition.MULTIMODAL_PRESETS[fdata._canonical(args.dataset)]
    minority = groups[1][0]
    labels = fdata.load(args.dataset, train=True).y.numpy()
    feds, cells = {}, []
    for root in args.runs:
        for name, r in read_cells(Path(root), args.dataset):
            if r["method"] not in args.methods:
                continue
            seed = r["settings"]["seed"]
            if seed not in feds:
                feds[seed] = waffle_ibp_data(args.dataset, "multimodal", seed=seed, groups=groups)
            if feds[seed].fingerprint != r["data_fingerprint"]:
                print(f"skipped {name}: its data are not the {args.dataset} preset's partition for seed {seed}")
                continue
            cells.append((name, r))
    if not cells:
        raise SystemExit(f"no finished {args.dataset} multimodal cells of {args.methods} under {args.runs}")
    sets = {s: class_sets(f.y.numpy(), [np.concatenate([tr, te]) for tr, te in zip(f.train, f.test)])
            for s, f in feds.items()}
    by_set = collections.defaultdict(list)
    for _, r in cells:
        for s, a in zip(sets[r["settings"]["seed"]], r["final"]["local_acc_per_client"]):
            by_set[s].append(a)
    pair_mean = {s: float(np.mean(v)) for s, v in by_set.items()}
    overall = float(np.mean([a for v in by_set.values() for a in v]))

    rows, ids = [], dict(dataset=args.dataset, minority_classes="-".join(map(str, minority)))
    for name, r in cells:
        seed, f = r["settings"]["seed"], feds[r["settings"]["seed"]]
        evals = [h["local_acc_per_client"] for h in r["history"] if h.get("local_acc_per_client")]
        m = {**decompose(r["final"]["local_acc_per_client"], r["groups"], [len(t) for t in f.test]),
             "last5": float(np.mean(evals[-5:], axis=0).var()),
             "pair_model": pair_model_variance(sets[seed], pair_mean, overall)}
        m.update({f"single_class_{c}": sum(s == (c,) for s in sets[seed]) for c in minority})
        rows += [{**ids, "method": r["method"], "variant": variant(r), "seed": seed, "metric": k, "value": round(v, 4)}
                 for k, v in m.items()]
    for c in minority:   # how a client holding one minority class alone scores, pooled over the cells read
        if (c,) in by_set:
            rows.append({**ids, "method": "pooled cells", "variant": f"{len(by_set[(c,)])} clients", "seed": None,
                         "metric": f"single_class_{c} accuracy", "value": round(pair_mean[(c,)], 4)})
    draws = []
    for s in range(1000, 1000 + args.mc):
        cs = class_sets(labels, partition.multimodal(labels, groups, 2, seed=s))
        draws.append({"pair_model": pair_model_variance(cs, pair_mean, overall),
                      **{f"single_class_{c}": sum(x == (c,) for x in cs) for c in minority}})
    closed = expected_single_class(groups)
    for k in draws[0]:
        v = np.array([d[k] for d in draws], float)
        rows += [{**ids, "method": "random partition", "variant": f"{args.mc} draws", "seed": None, "metric": f"{k} {stat}",
                  "value": round(float(x), 4)} for stat, x in (("mean", v.mean()), ("sd", v.std(ddof=1)))]
        if k.startswith("single_class_"):
            rows.append({**ids, "method": "random partition", "variant": "closed form", "seed": None, "metric": f"{k} mean",
                         "value": round(closed[int(k.rsplit('_', 1)[1])], 4)})
    for n in range(4):   # the pair model's variance by how many single-class clients of the paper's "shirts" there are
        sel = [d["pair_model"] for d in draws if d.get("single_class_6", -1) == n]
        if sel:
            rows.append({**ids, "method": "random partition", "variant": f"single_class_6 = {n}", "seed": None,
                         "metric": "pair_model mean", "value": round(float(np.mean(sel)), 4)})
    print_summary(rows)
    if not args.no_write:
        meta = results.provenance(wall_s=time.time() - t0, cells=[n for n, _ in cells],
                                  scale="full data, the finished 100-round cells of Table 1")
        print("wrote", *results.write_table(results.RESULTS_DIR / "waffle_ibp", "variance_probe", rows, meta))


def print_summary(rows):
    """Per method: each metric's mean over seeds; then the random-partition rows."""
    cell = collections.defaultdict(list)
    for r in rows:
        cell[r["method"], r["variant"], r["metric"]].append(r["value"])
    methods = sorted({(m, v) for m, v, _ in cell if m not in ("random partition", "pooled cells")})
    metrics = list(dict.fromkeys(k for m, v, k in cell if m not in ("random partition", "pooled cells")))
    print(f"{'method':22s} seeds " + " ".join(f"{k[:14]:>14s}" for k in metrics))
    for m, v in methods:
        vals = [cell[m, v, k] for k in metrics]
        print(f"{m + ' ' + v:22s} {len(vals[0]):5d} " + " ".join(f"{np.mean(x):14.1f}" for x in vals))
    for (m, v, k), x in cell.items():
        if m in ("random partition", "pooled cells"):
            print(f"{m}, {v}: {k} = {x[0]:.2f}")


if __name__ == "__main__":
    main()
