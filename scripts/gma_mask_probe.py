"""How much of the averaged update does GMA's soft mask let through, round by round, in a given setting?

    FLTUTOR_DATA=/path/to/datasets python scripts/gma_mask_probe.py                      # the defaults below
    FLTUTOR_DATA=... python scripts/gma_mask_probe.py --setting fashionmnist 10 --rounds-10 10

Trains FedAvg-style FedOpt (server SGD) at Table 2's CPU protocol (``configs/03_table2_cpu.yaml``: batch 32,
client lr 0.05, momentum 0.9, one local epoch, server rate 1, 10 clients a round) on label-skewed data (a
setting of 10 clients instead takes every client every round at ``--lr-10``, for ``--rounds-10`` rounds, on the
first seed only), once
with plain averaging (AVG) and once with GMA, and before every round reads the updates the round's cohort
is about to send (``Federation.intercept``: the same batches the round then trains on). From them it
records, for the server step that follows:

    below_tau      share of coordinates whose sign agreement A = |mean_n sign(u_n)| is below tau
    zero_agreement share with A = 0 (as many clients push a coordinate up as down: the mask is 0 there)
    mask_mean      mean of GMA's mask over the coordinates
    step_ratio     |m * Delta| / |Delta|: the length of the masked step relative to the unmasked one
                   (Delta is the size-weighted mean update; at server rate 1 AVG's step is Delta itself)
    cum_ratio      |sum_t m_t * Delta_t| / |sum_t Delta_t| over the probed rounds so far: along AVG's
                   trajectory, how far GMA's masks would have moved the model against how far AVG did
    cum_cos        the cosine between those two sums

If step_ratio stays near 1 while cum_ratio falls, the coordinates the mask damps are those on which the
rounds agree with each other though a round's clients do not: a slow, consistent drift that GMA learns at
a fraction of AVG's speed.

A step_ratio of 0.5 means that at the same server rate GMA moves half as far as AVG would from the same
point. Table 10 (paper and ours) puts AVG below its best at server rates under 1, so a small ratio
predicts that GMA at server rate 1 learns like a slowed-down AVG. Rows go to results/gma/mask_probe.csv
(+ .json), one per setting, trajectory, seed, round and metric, unless --no-write.
"""
from __future__ import annotations

import argparse
import sys
import time

import torch

from fltutor import aggregators, results
from fltutor.federation import Federation
from fltutor.scenarios import GMA_SETTINGS, gma_data, gma_model

DEFAULT_SETTINGS = [("fashionmnist", 500), ("mnist", 500), ("fashionmnist", 10)]


def masked_step(updates: torch.Tensor, sizes: torch.Tensor, tau: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(Delta, m * Delta) of one round: the size-weighted mean update and GMA's masked step, (d,) each."""
    delta = (sizes[:, None] / sizes.sum() * updates).sum(0)
    return delta, aggregators.gma_mask(updates, tau) * delta


def mask_stats(updates: torch.Tensor, sizes: torch.Tensor, tau: float) -> dict[str, float]:
    """The per-round numbers above: updates (C, d) of the cohort's C clients, sizes (C,)."""
    a = aggregators.agreement(updates)
    delta, step = masked_step(updates, sizes, tau)
    return {"below_tau": float((a < tau).double().mean()), "zero_agreement": float((a == 0).double().mean()),
            "mask_mean": float(aggregators.gma_mask(updates, tau).double().mean()),
            "step_ratio": float(step.norm() / delta.norm())}


def cumulative_stats(sum_delta: torch.Tensor, sum_step: torch.Tensor) -> dict[str, float]:
    """cum_ratio and cum_cos of the running sums of Delta_t and m_t * Delta_t."""
    return {"cum_ratio": float(sum_step.norm() / sum_delta.norm()),
            "cum_cos": float(torch.nn.functional.cosine_similarity(sum_step, sum_delta, dim=0))}


def probe(dataset: str, clients: int, aggregation: str, seed: int, rounds: int, *, lr: float, batch_size: int,
          tau: float, every: int = 1) -> list[dict]:
    """mask_stats every ``every`` rounds along one run's own trajectory (AVG's or GMA's); a list of tidy rows."""
    data = gma_data(dataset, "label", clients, seed=seed)
    fed = Federation(gma_model(dataset, data), data, "fedopt", server_opt="sgd", server_lr=1.0, aggregation=aggregation,
                     tau=tau, lr=lr, batch_size=batch_size, momentum=GMA_SETTINGS["momentum"], local_epochs=1,
                     client_fraction=min(1.0, 10 / clients), rounds=rounds, eval_every=rounds + 1, seed=seed,
                     progress=False)
    ids = {"dataset": dataset, "skew": "label", "clients": clients, "trajectory": "AVG" if aggregation == "mean" else "GMA",
           "lr": lr, "server_lr": 1.0, "tau": tau, "batch_size": batch_size, "seed": seed}
    rows, sums = [], None
    for r in range(rounds):
        if r % every == 0:
            cohort = fed.sample_clients(0, fed.round)
            msgs = fed.intercept(list(cohort))
            g = fed.global_params
            ups = torch.stack([torch.cat([(msgs[int(k)][p] - g[p][0]).flatten() for p in g]) for k in cohort])
            if not torch.isfinite(ups).all():
                print(f"{dataset} {clients} {ids['trajectory']} seed {seed}: the round-{r + 1} updates are not finite "
                      f"(lr {lr} is too high here); nothing recorded from this round on")
                rows.append({**ids, "round": r + 1, "metric": "diverged_round", "value": r + 1})
                break
            sizes = torch.tensor([float(len(data.train[int(k)])) for k in cohort])
            delta, step = masked_step(ups, sizes, tau)
            sums = (delta, step) if sums is None else (sums[0] + delta, sums[1] + step)
            stats = {**mask_stats(ups, sizes, tau), **cumulative_stats(*sums)}
            rows += [{**ids, "round": r + 1, "metric": k, "value": round(v, 4)} for k, v in stats.items()]
            print(f"{dataset} {clients} {ids['trajectory']} seed {seed} round {r + 1:3d}  "
                  + "  ".join(f"{k} {v:.3f}" for k, v in stats.items()), flush=True)
        fed.run_round()
        if fed.diverged[0]:
            print(f"{dataset} {clients} {ids['trajectory']} seed {seed}: diverged at round {fed.diverged[0]['round']}")
            rows.append({**ids, "round": fed.diverged[0]["round"], "metric": "diverged_round",
                         "value": fed.diverged[0]["round"]})
            break
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--setting", nargs=2, action="append", metavar=("DATASET", "CLIENTS"),
                    help="repeatable; default: fashionmnist 500, mnist 500, fashionmnist 10")
    ap.add_argument("--rounds", type=int, default=200, help="rounds of the 500-client settings (Table 2's 200)")
    ap.add_argument("--rounds-10", type=int, default=10, help="rounds of a 10-client setting (each is the whole data)")
    ap.add_argument("--every", type=int, default=1, help="probe every this many rounds (the sums skip the others)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--lr", type=float, default=0.05, help="client lr of the 500-client settings (Table 2's CPU pair)")
    ap.add_argument("--lr-10", type=float, default=0.01, help="client lr of a 10-client setting (0.05 diverges in "
                    "round 1 on the whole data: 169 steps a round with momentum 0.9)")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--tau", type=float, default=0.4)
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args()
    settings = [(d, int(n)) for d, n in a.setting] if a.setting else DEFAULT_SETTINGS
    # provenance now, not at the end: the commit is the code that ran, even if the checkout moves meanwhile
    meta = results.provenance(command=" ".join(["python scripts/gma_mask_probe.py", *sys.argv[1:]]),
                              scale="full data, probe (no evaluation)")
    t0, rows = time.time(), []
    for dataset, clients in settings:
        many = clients > 10
        for seed in a.seeds if many else a.seeds[:1]:
            for agg in ("mean", "gma"):
                rows += probe(dataset, clients, agg, seed, a.rounds if many else a.rounds_10, lr=a.lr if many else a.lr_10,
                              batch_size=a.batch_size, tau=a.tau, every=a.every if many else 1)
    if not a.no_write:
        meta["wall_s"] = round(time.time() - t0, 1)
        print("wrote", *results.write_table(results.RESULTS_DIR / "gma", "mask_probe", rows, meta, merge=True))


if __name__ == "__main__":
    main()
