"""Does SCAFFOLD's option I (or gradient clipping) keep SCAFFOLD and weighted WAFFLE finite where option II diverges?

    FLTUTOR_DATA=/path/to/datasets python scripts/scaffold_control_probe.py                  # C, 480 images, lr 0.1
    FLTUTOR_DATA=... python scripts/scaffold_control_probe.py --distribution "A*" --images 0  # 0: every image
    FLTUTOR_DATA=... python scripts/scaffold_control_probe.py --controls II --clip-norms 1 10  # clipped gradients

Karimireddy et al. (2020, Alg. 1 line 12) give two ways for a client to renew its control variate:
option I, the gradient of its loss at the server model (one more pass over its data), and option II,
read off the distance its local path travelled. The weighted-averaging WAFFLE paper writes option II
(its Alg. 2), and with it both methods turn non-finite at lr 0.1 here (notebook 04, section 9). A path
that went wrong feeds option II's next correction; option I's correction does not depend on the path.
Without momentum option II's c_i+ is the mean raw gradient along the path, so clipping every mini-batch
gradient at G (``--clip-norms``; the paper states no clipping) bounds every |c_i| by G: a third candidate.
Another is the network: the paper says only "LeNet-5", and ``--model lenet5_classic`` trains the 1998
design's tanh and average pooling, whose bounded units keep gradients smaller than our ReLU/max-pool one.
This trains both methods with each option on the same data and seeds (the paper's MNIST setting:
LeNet-5, SGD at ``--lr``, batch 32, one local epoch, every agent every round, SCAFFOLD with uniform
weights, WAFFLE with ΔΩ = 3.2) and scores Alice (agent 0) on ``--test-images`` of her test images
every round. Rows (best, final and divergence round per run) merge into
results/waffle_weighted/scaffold_control.csv (+ .json), and Alice's accuracy and weight round by round into
scaffold_control_curves.csv, unless --no-write; finished runs are cached
under --out-root, so a stopped call resumes.
"""
from __future__ import annotations

import argparse
import shlex
import sys
import time

import numpy as np

from fltutor import results
from fltutor.federation import grid, sweep
from fltutor.scenarios import waffle_weighted_data

TARGET = 0
SETTINGS = {"scaffold": {"weighting": "uniform"}, "waffle_weighted": {"target": TARGET, "delta_omega": 3.2}}


def alice(res) -> np.ndarray:
    """Alice's local test accuracy (%) at every evaluated round (none after a divergence)."""
    return np.array([h["local_acc_per_client"][TARGET] for h in res["history"] if "local_acc_per_client" in h])


def curve_rows(ids: dict, res: dict) -> list[dict]:
    """Tidy rows of one run's curves, round by round: Alice's accuracy and (WAFFLE) her own aggregation weight,
    so a collapse, or the turn to local training, can be drawn and not only summed up."""
    out = []
    for h in res["history"]:
        if "local_acc_per_client" in h:
            out.append({**ids, "round": h["round"], "metric": "alice_acc", "value": round(float(h["local_acc_per_client"][TARGET]), 3)})
        if "weights" in h:
            out.append({**ids, "round": h["round"], "metric": "alice_weight", "value": round(float(h["weights"][TARGET]), 5)})
    return out


def run_rows(ids: dict, res: dict) -> list[dict]:
    """Tidy rows of one run: Alice's best and final accuracy (final None if it diverged), the divergence round,
    the agent whose training went non-finite first, and (WAFFLE) that agent's aggregation weight in the last
    finished round: the share of Alice's model it still had a say in."""
    c = alice(res)
    d = res["diverged"]
    weights = [h["weights"] for h in res["history"] if "weights" in h]
    vals = {"best_acc": float(c.max()) if len(c) else None,
            "final_acc": None if d or not len(c) else float(c[-1]),
            "diverged_round": d["round"] if d else None,
            "diverged_agent": d.get("client") if d else None,
            "diverged_agent_weight": weights[-1][d["client"]] if d and weights and d.get("client") is not None else None,
            "agents_set_aside": len({k for h in res["history"] for k in h.get("set_aside", [])}),
            "first_set_aside_round": next((h["round"] for h in res["history"] if h.get("set_aside")), None)}
    return [{**ids, "metric": k, "value": None if v is None else round(float(v), 4)} for k, v in vals.items()]


def summary(rows: list[dict]) -> list[str]:
    """One line per (method, control, c rule, non-finite rule): best mean ± sd over seeds, and how many diverged, when."""
    out = []
    rows = [{**r, "grad_clip_norm": float(r.get("grad_clip_norm") or 0)} for r in rows]   # rows from before clipping: 0
    rows = [{**r, "model": r.get("model") or "lenet5"} for r in rows]                        # ... or a model column
    where = ("distribution", "images_per_agent", "rounds")   # one setting each; kept apart when a table mixes them
    rows = [{**r, **{k: r.get(k) or "" for k in where}} for r in rows]
    mixed = len({tuple(r[k] for k in where) for r in rows}) > 1
    key = lambda r: (r["method"], r["control"], r.get("c_rule") or "", r.get("nonfinite") or "",  # noqa: E731
                     float(r.get("grad_clip_norm") or 0), r["model"], *(r[k] for k in where))
    cols = ["method", "control", "c_rule", "nonfinite", "grad_clip_norm", "model", *where]
    for (m, ctl, rule, nf, clip, model, dist, imgs, rounds), got in results.summarize(rows, cols, "best_acc").items():
        clip = float(clip or 0)
        mine = [r for r in rows if key(r) == (m, ctl, rule or "", nf or "", clip, model, dist, imgs, rounds)]
        stops = sorted(int(r["value"]) for r in mine if r["metric"] == "diverged_round" and r["value"] is not None)
        finals = [r["value"] for r in mine if r["metric"] == "final_acc" and r["value"] is not None]
        n = got["n"] + got["missing"]
        fin = f"final {np.mean(finals):6.2f}" if finals else "final    –  "
        best = "   –  " if got["mean"] is None else f"{got['mean']:6.2f}" + (f" ± {got['sd']:5.2f}" if got["sd"] is not None else "")
        out.append((f"{dist} {imgs} images {rounds} rounds: " if mixed else "") + f"{m:16s} option {ctl:2s} {rule or '':13s} {nf or '':9s} {f'clip {clip:g}' if clip else '':9s} "
                   f"{'' if model == 'lenet5' else model + ' '}"
                   f"best {best} ({n} seeds)  {fin}  "
                   f"diverged {len(stops)} of {n}" + (f" (rounds {', '.join(map(str, stops))})" if stops else ""))
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--distribution", default="C", help="A, B, C, A* or B* (default C)")
    ap.add_argument("--images", type=int, default=480, help="training images per agent (0: all, the paper's scale)")
    ap.add_argument("--test-images", type=int, default=200, help="Alice's test images scored every round (0: all)")
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--methods", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    ap.add_argument("--controls", nargs="+", default=["II", "I"], choices=["II", "I"])
    ap.add_argument("--c-rules", nargs="+", default=["increments"], choices=["increments", "weighted_mean"],
                    help="weighted WAFFLE's server rule for c: the paper's increments, or the weighted mean of the c_i+")
    ap.add_argument("--nonfinite", nargs="+", default=["stop"], choices=["stop", "set_aside"],
                    help="weighted WAFFLE: stop at an agent's first non-finite number, or set that agent aside")
    ap.add_argument("--clip-norms", type=float, nargs="+", default=[0.0],
                    help="clip every mini-batch gradient to this L2 norm (grad_clip_norm; 0: off, the paper's)")
    ap.add_argument("--model", default="lenet5", choices=["lenet5", "lenet5_classic"],
                    help="LeNet-5 with ReLU and max-pooling (ours, default) or the 1998 paper's tanh and average pooling")
    ap.add_argument("--out-root", default="runs/scaffold_control", help="cache of finished runs (resumes)")
    ap.add_argument("--no-write", action="store_true", help="print only; leave results/ alone")
    a = ap.parse_args(argv)
    if a.images < 0 or a.test_images < 0 or a.rounds < 1 or a.lr <= 0 or min(a.clip_norms) < 0:
        ap.error(f"--images {a.images}, --test-images {a.test_images}, --rounds {a.rounds}, --lr {a.lr}, "
                 f"--clip-norms {a.clip_norms}: images >= 0, rounds >= 1, lr > 0 and clip norms >= 0")
    meta = results.provenance(command="python " + shlex.join(["scripts/scaffold_control_probe.py", *sys.argv[1:]]))
    t0 = time.time()
    fds = []
    for s in a.seeds:
        fd = waffle_weighted_data("mnist", a.distribution, seed=s, max_train_per_agent=a.images or None)
        if a.test_images:   # the same subsets as notebook 04's max_test_per_agent
            rng = np.random.default_rng([s, 8])
            fd = fd.with_parts(fd.train, [np.sort(rng.choice(t, size=min(len(t), a.test_images), replace=False))
                                          for t in fd.test])
        fds.append(fd)
    K = -(-len(fds[0].train[TARGET]) // 32)
    rows, curves = [], []
    cells = [(m, ctl, rule, nf) for m in a.methods for ctl in a.controls
             for rule in (a.c_rules if m == "waffle_weighted" else [None])
             for nf in (a.nonfinite if m == "waffle_weighted" else [None])]
    for m, ctl, rule, nf in cells:
        t1 = time.time()
        extra = {} if rule is None else {"c_rule": rule, "nonfinite": nf}
        runs = grid(grad_clip_norm=a.clip_norms, seed=a.seeds)
        out = sweep(a.model, [fds[a.seeds.index(r["seed"])] for r in runs], m, runs, out_root=a.out_root, progress=False,
                    label=f"control{ctl}-{a.distribution.replace('*', 'star')}-{a.images or 'all'}"
                          + ("" if a.model == "lenet5" else f"-{a.model}"),
                    rounds=a.rounds, local_epochs=1, batch_size=32, lr=a.lr, client_fraction=1.0,
                    control=ctl, **SETTINGS[m], **extra)
        for r, res in zip(runs, out):
            fd = fds[a.seeds.index(r["seed"])]
            ids = {"dataset": "mnist", "distribution": a.distribution, "method": m, "control": ctl,
                   "c_rule": rule or "", "nonfinite": nf or "", "images_per_agent": len(fd.train[TARGET]), "local_steps": K, "lr": a.lr,
                   "grad_clip_norm": r["grad_clip_norm"], "rounds": a.rounds,
                   **({} if a.model == "lenet5" else {"model": a.model}), "seed": r["seed"]}   # no column: lenet5
            rows += run_rows(ids, res)
            curves += curve_rows(ids, res)
        print(f"{m} option {ctl}{' ' + rule if rule else ''}{' ' + nf if nf else ''}: {len(runs)} runs in "
              f"{time.time() - t1:.0f} s", flush=True)
    print(f"\n{a.distribution}, {len(fds[0].train[TARGET])} images for Alice (K = {K} steps), lr {a.lr}, {a.rounds} rounds")
    print("\n".join(summary(rows)))
    if not a.no_write:
        meta = {**meta, "wall_s": round(time.time() - t0, 1), "data_source": fds[0].source,
                "scale": "full scale" if not a.images else f"reduced scale: {a.images} images per agent"}
        print("wrote", *results.write_table(results.RESULTS_DIR / "waffle_weighted", "scaffold_control", rows, meta,
                                            merge=True))
        print("wrote", *results.write_table(results.RESULTS_DIR / "waffle_weighted", "scaffold_control_curves", curves,
                                            meta, merge=True))


if __name__ == "__main__":
    main()
