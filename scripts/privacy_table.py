"""Print the privacy audit's full-scale table (results/privacy/audit_<dataset>.csv) as markdown, for the README.

    python scripts/privacy_table.py mnist

One row per method: what the attacker holds (the intercepted message; Local: the device; DP-FedAvg
also the released global model), each attack's mean ± sample sd over seeds, and local accuracy.
"""
from __future__ import annotations

import argparse
from statistics import mean, stdev

from fltutor import audit, results

COLUMNS = [("shadow", "accuracy", 100, "shadow acc"), ("shadow", "f1", 100, "shadow F1"),
           ("shadow", "auc", 100, "shadow AUC"), ("shadow", "tpr@1%fpr", 100, "TPR@1%FPR"),
           ("loss", "auc", 100, "loss AUC"), ("logit", "accuracy", 100, "logit acc"),
           ("inversion", "psnr", 1, "PSNR dB"), ("inversion", "attack_accuracy", 100, "inversion acc")]


def target_label(method: str, view: str, guess: str) -> str:
    """The table's "target" cell: the view, and the b the attacker put in (the L1 ablation's prior is b = 1)."""
    if not guess:
        return view
    if guess == "ones" or (guess == "prior" and method == "waffle_ibp_l1"):
        guess = "prior, b = 1" if guess == "prior" else "b = 1"
    return f"{view} ({guess})"


PAIRED = [("shadow", "auc", 100, "shadow AUC"), ("loss", "auc", 100, "loss AUC"), ("inversion", "psnr", 1, "PSNR dB"),
          ("inversion", "attack_accuracy", 100, "inversion acc")]
GUESSES = [("prior", "prior mean"), ("ones", "b = 1"), ("update", "read from the update"),
           ("fitted", "fitted to the message"), ("true", "the client's true b")]


def paired_block(rows: list[dict]) -> None:
    """WAFFLe's message minus FedAvg's, seed by seed, for each b the attacker puts in. Within a seed both are
    attacked with the same data split, shadow models, judge and queries, so the spread of the per-seed difference
    is the one that says whether WAFFLe leaks less; the table's two separate sds are wider."""
    val = {}
    for r in rows:
        if r["view"] == "message" and (r["method"], r["guess"] or "") in {("fedavg", "")} | {
                ("waffle_ibp", g) for g, _ in GUESSES}:
            val[(r["method"], r["guess"] or "", r["attack"], r["metric"], r["seed"])] = r["value"]
    lines = []
    for guess, label in GUESSES:
        cells, any_seed = [], False
        for attack, metric, scale, _ in PAIRED:
            d = [(val[("waffle_ibp", guess, attack, metric, s)] - v) * scale
                 for (m, g, a, k, s), v in val.items() if (m, g, a, k) == ("fedavg", "", attack, metric)
                 and v is not None and val.get(("waffle_ibp", guess, attack, metric, s)) is not None]
            if not d:
                cells.append("–")
                continue
            any_seed = True
            sd = f" ± {stdev(d):.2f}" if len(d) > 1 else ""
            cells.append(f"{round(mean(d), 2) + 0.0:+.2f}{sd} (lower in {sum(x < 0 for x in d)} of {len(d)})")
        if any_seed:
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
    if lines:
        print("\nWAFFLe's message minus FedAvg's, seed by seed (mean ± sd of the per-seed difference; the seeds share "
              "data, shadows, judge and queries):\n")
        print("| b the attacker puts in | " + " | ".join(c[3] for c in PAIRED) + " |")
        print("|---|" + "---|" * len(PAIRED))
        print(*lines, sep="\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset", help="mnist or fashionmnist")
    a = ap.parse_args()
    got = results.read_table(results.RESULTS_DIR / "privacy", f"audit_{a.dataset}")
    if got is None:
        raise SystemExit(f"no results/privacy/audit_{a.dataset}.csv yet: run configs/05_paper.yaml")
    rows, meta = got
    for r in rows:   # an empty CSV cell reads as None; the guess column uses "" for "nothing was missing"
        r["guess"] = r["guess"] or ""
    names = list(dict.fromkeys(r["name"] for r in rows if r["name"] != "evaluator"))
    method = {r["name"]: r["method"] for r in rows}
    # WAFFLe's message also with every factor switched on (a guess that needs no knowledge of the client), right
    # under its prior-b row; DP-FedAvg's released model after all the messages
    views = [v for n in names for v in [(n, *audit.headline_target(method[n]))] + ([(n, "message", "ones")]
                                                                         if method[n] == "waffle_ibp" else [])]
    views += [(n, "server", "") for n in names if method[n] == "dp_fedavg"]
    stats = results.summarize(rows, by=("name", "view", "guess", "attack", "metric"))
    util = results.summarize(rows, by=("name", "metric"), metric="mean_local_acc")
    head = ["method", "target"] + [c[3] for c in COLUMNS] + ["local acc", "seeds"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for n, view, guess in views:
        cells = [n, target_label(method[n], view, guess)]
        seeds = 0
        for attack, metric, scale, _ in COLUMNS:
            s = stats.get((n, view, guess, attack, metric))
            if s is None or s["mean"] is None:
                cells.append("–")
                continue
            seeds = max(seeds, s["n"])
            cells.append(f"{s['mean'] * scale:.1f}" + (f" ± {s['sd'] * scale:.1f}" if s["sd"] is not None else ""))
        u = util.get((n, "mean_local_acc"))
        cells.append(f"{u['mean']:.1f}" + (f" ± {u['sd']:.1f}" if u["sd"] is not None else "") if u else "–")
        cells.append(str(seeds))
        print("| " + " | ".join(cells) + " |")
    paired_block(rows)
    ev = results.summarize(rows, by=("metric",), metric="evaluator_acc").get(("evaluator_acc",))
    print()   # every command that wrote rows here (pFedMe was audited by a run of its own), then the judge
    for p in meta.get("parts") or [meta]:
        dirty = " (uncommitted edits)" if p.get("dirty") else ""
        print(f"{p.get('command')} | {p.get('device')} | {p.get('date')} | commit {str(p.get('commit'))[:10]}{dirty}"
              f" | {p.get('wall_s')} s" + "".join(f" | {p[k]}" for k in ("note", "command_note") if p.get(k)))
    if ev:
        print(f"evaluation classifier {ev['mean']:.2f} % (mean over the seeds' rows)")


if __name__ == "__main__":
    main()
