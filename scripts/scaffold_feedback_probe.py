"""Why SCAFFOLD (and so weighted WAFFLE) collapses at lr 0.1: follow its control variates round by round.

    FLTUTOR_DATA=/path/to/datasets python scripts/scaffold_feedback_probe.py            # C, 480 images, lr 0.1
    FLTUTOR_DATA=... python scripts/scaffold_feedback_probe.py --images 0 --lr 0.01     # 0: every image

Runs SCAFFOLD (uniform weights, the weighted-averaging WAFFLE paper's Alg. 2) on distribution C and
prints, after every round, the model's norm |x|, the server variate's |c|, the largest client
correction max_i |c - c_i|, and K * lr * that, the most a round's corrections alone can move a
client's model. Writes results/waffle_weighted/scaffold_feedback.csv (+ .json) unless --no-write.
"""
from __future__ import annotations

import argparse
import time

import torch

from fltutor import results
from fltutor.federation import Federation
from fltutor.scenarios import waffle_weighted_data


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--distribution", default="C")
    ap.add_argument("--images", type=int, default=480, help="training images per agent (0: all)")
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args()
    t0 = time.time()
    fd = waffle_weighted_data("mnist", a.distribution, seed=a.seed, max_train_per_agent=a.images or None)
    K = -(-len(fd.train[0]) // a.batch_size)
    fed = Federation("lenet5", fd, "scaffold", weighting="uniform", rounds=a.rounds, local_epochs=1,
                     batch_size=a.batch_size, lr=a.lr, client_fraction=1.0, progress=False, eval_every=a.rounds + 1,
                     seed=a.seed)
    rows = []
    ids = {"dataset": "mnist", "distribution": a.distribution, "images_per_agent": len(fd.train[0]), "local_steps": K,
           "lr": a.lr, "seed": a.seed}
    for r in range(a.rounds):
        fed.run_round()
        c = torch.cat([v.flatten() for k, v in fed.server[0].items() if k.startswith("c.")])
        ci = torch.cat([v[0].flatten(1) for k, v in fed.private.items() if k.startswith("c_i.")], 1)   # (N, P)
        x = torch.cat([v.flatten() for v in fed.run_params(0).values()])
        gap = float((ci - c).norm(dim=1).max())
        vals = {"model_norm": float(x.norm()), "c_norm": float(c.norm()), "max_correction": gap,
                "K_lr_max_correction": K * a.lr * gap}
        print(f"round {r + 1:3d}  |x| {vals['model_norm']:10.4g}  |c| {vals['c_norm']:10.4g}  max_i |c - c_i| {gap:10.4g}  "
              f"K*lr*max {vals['K_lr_max_correction']:10.4g}" + ("  diverged" if fed.diverged[0] else ""), flush=True)
        rows += [{**ids, "round": r + 1, "metric": k, "value": v if v == v and abs(v) != float("inf") else None}
                 for k, v in vals.items()]
        if fed.diverged[0]:
            break
    if not a.no_write:
        meta = results.provenance(wall_s=time.time() - t0, data_source=fd.source)
        print("wrote", *results.write_table(results.RESULTS_DIR / "waffle_weighted", "scaffold_feedback", rows, meta, merge=True))


if __name__ == "__main__":
    main()
