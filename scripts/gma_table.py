"""Print GMA's learning-rate grid (results/gma/table10.csv), Tables 2-3 (tables2_3.csv) and the mask probe (mask_probe.csv) as markdown, for the README.

    python scripts/gma_table.py [--folder results/gma] [--section KEY [--rounds N]]

Table 10: one row per (server rate, client rate): AVG and GMA as mean ± sample sd over seeds of the best
test accuracy over the rounds (and the last-10 mean), GMA − AVG, whether that is beyond the two sds
added ("beyond both sds?", a strict test of unpaired means), and the paper's Table 10 values; a cell
where any seed diverged says so instead of averaging the rest. Tables 2-3: one row per (setting,
algorithm, learning-rate pair): the same, with GMA − AVG taken seed by seed (its own mean ± sd;
"beyond its sd?" asks whether |mean| > sd, a weak test: t > √n, a two-sided p of 0.14 with 4 seeds
and 0.23 with 3) beside the paper's lead. The mask probe (scripts/gma_mask_probe.py): one
row per (setting, trajectory): the per-round statistics averaged over the rounds, then the summed steps'
ratio and cosine at the last round, each as mean ± sd over seeds. Each table's first line says how it was
made and at what scale (a table merged from several commands names each); Table 10's rows at other rounds
(a CPU's 15-round grid beside the paper's 100) are a grid of their own, labelled with their command's scale.
server_rate.csv (scripts/gma_server_rate.py) is printed as Tables 2-3 are. table10_curves.csv (every Table 10
run's test accuracy per round) gives, seed by seed, the best by rounds 15 and 50, the best, the last round's
accuracy and the first round at 80 % or more: how much of a "best" is an early lead or one peak of a swinging curve.
--section table10_selected: Table 2's FedAvg row on FMNIST 2-class, 10 clients, which is Table 10's setting, read off
Table 10's runs with AVG and GMA each at the pair that scores best on the clients' held-out splits (two rules).
quick_seeds.csv (scripts/gma_quick_seeds.py): notebook 03's quick grid over more seeds, per data source and server rate.
participation.csv, convex.csv and fig4.csv (scripts/gma_appendix.py): Tables 4-5, App. E and Fig. 4 on all the data.
ablations_full.csv (scripts/gma_ablations.py): Tables 8, 9 and 6 on all of FMNIST, and Fig. 3d (GMA at each tau beside
the one AVG run of each seed).
"""
from __future__ import annotations

from pathlib import Path

from fltutor import results
from fltutor.results import algorithm_name, momentum_of   # noqa: F401 (notebook 03 reads gt.momentum_of)
from fltutor.metrics import mean_std
from fltutor.paper_tables import (GMA_CONVEX, GMA_TABLE, GMA_TABLE4, GMA_TABLE5, GMA_TABLE6, GMA_TABLE8, GMA_TABLE9,
                                  GMA_TABLE10, GMA_TABLE10_CLIENT_LRS)


def cell(stats: dict, key: tuple) -> tuple:
    s = stats.get(key, {"mean": None, "sd": None, "n": 0})
    return s["mean"], s["sd"], s["n"], s.get("diverged", "")


def show(m, sd, n, note="") -> str:
    return (note or "—") if m is None else f"{m:.2f}" + ("" if sd is None else f" ± {sd:.2f}")


def with_diverged(rows: list[dict], by: list[str], metric: str) -> dict:
    """summarize(), but a group in which any seed diverged reads 'k of n diverged' instead of a mean."""
    st = results.summarize(rows, by, metric)
    for k, s in st.items():
        if s["missing"]:
            st[k] = {"mean": None, "sd": None, "n": 0, "diverged": f"{s['missing']} of {s['n'] + s['missing']} diverged"}
    return st


def lead_cells(d: dict) -> tuple[str, str]:
    """A paired_difference group as ("mean ± sd" of GMA − AVG seed by seed, |mean| > sd? "yes"/"no"/"—")."""
    if d["mean"] is None or d["missing"]:
        return "—", "—"
    gap = f"{d['mean']:+.2f}" + ("" if d["sd"] is None else f" ± {d['sd']:.2f}")
    return gap, "—" if d["sd"] is None else ("yes" if abs(d["mean"]) > d["sd"] else "no")


def print_table10(rows: list[dict], meta: dict) -> None:
    print(*results.provenance_comments(meta), sep="\n")
    # one grid per (client momentum, rounds): the paper's 0.9 first, then the longest runs first, so the
    # paper's 100-round grid and a CPU's 15-round one merged into one table never pool their seeds
    grids = sorted({(momentum_of(r), r.get("rounds")) for r in rows}, key=lambda g: (-g[0], -(g[1] or 0)))
    momenta, rounds = {m for m, _ in grids}, {n for _, n in grids}
    for m, n in grids:
        if len(grids) > 1:
            head = [f"client momentum {m:g}" + (" (the paper's)" if m == 0.9 else "")] if len(momenta) > 1 else []
            head += [f"{n} rounds ({results.scale_label(meta, grid_rounds=n)})"] if len(rounds) > 1 else []
            print("\n" + ", ".join(head) + "\n")
        print_grid([r for r in rows if (momentum_of(r), r.get("rounds")) == (m, n)])


def print_grid(rows: list[dict]) -> None:
    by = ["aggregation", "server_lr", "lr"]
    best, last = with_diverged(rows, by, "best_global_acc"), with_diverged(rows, by, "last10_global_acc")
    print("| server lr | client lr | AVG best | GMA best | GMA − AVG | beyond both sds? | AVG last 10 | GMA last 10 "
          "| paper AVG / GMA |")
    print("|---|---|---|---|---|---|---|---|---|")
    pairs = sorted({(r["server_lr"], r["lr"]) for r in rows})
    for g, l in pairs:
        (ma, sa, na, da), (mg, sg, ng, dg) = cell(best, ("AVG", g, l)), cell(best, ("GMA", g, l))
        d = None if ma is None or mg is None else mg - ma
        spread = (sa or 0) + (sg or 0)
        beyond = "—" if d is None or min(na, ng) < 2 else ("yes" if abs(d) > spread else "no")
        p = GMA_TABLE10["mean"].get(g), GMA_TABLE10["gma"].get(g)
        j = GMA_TABLE10_CLIENT_LRS.index(l) if l in GMA_TABLE10_CLIENT_LRS else None
        paper = "—" if None in p or j is None else f"{p[0][j]} / {p[1][j]}"
        print(f"| {g:g} | {l:g} | {show(ma, sa, na, da)} | {show(mg, sg, ng, dg)} | {'—' if d is None else f'{d:+.2f}'} | "
              f"{beyond} | {show(*cell(last, ('AVG', g, l)))} | {show(*cell(last, ('GMA', g, l)))} | {paper} |")


# Table 2's FMNIST 2-class 10-client FedAvg row is Table 10's setting (FedAvg, 10 clients, every client every round),
# so each aggregation's grid pick can be read off Table 10's runs without training anything again
SELECTION_RULES = {"seed0": "the first seed's held-out best (configs/03_paper.yaml's select_lr)",
                   "mean": "the held-out best, mean over every seed"}


def held_out_picks(rows: list[dict], rule: str) -> dict | None:
    """One grid's (server lr, client lr) picks under ``rule`` ("seed0" or "mean", SELECTION_RULES): AVG's, GMA's
    and the shared one (AVG's and GMA's scores added), each scored on the clients' held-out splits
    (best_local_acc), never on the test set. A cell with a scored run missing or diverged cannot be picked; ties go
    to the smaller rates. Returns {"AVG": pair, "GMA": pair, "shared": pair or None, "seeds": the scored seeds},
    or None where an aggregation has no cell to pick."""
    runs: dict = {}
    for r in rows:
        runs.setdefault((r["aggregation"], r["server_lr"], r["lr"]), {}).setdefault(r["seed"], {})[r["metric"]] = \
            r["value"]
    seeds = sorted({s for per_seed in runs.values() for s in per_seed})
    scored = seeds[:1] if rule == "seed0" else seeds

    def score(agg: str, pair: tuple) -> float | None:
        per_seed = runs.get((agg, *pair), {})
        vals = [per_seed.get(s, {}).get("best_local_acc") for s in scored]
        if any(v is None or per_seed[s].get("diverged_round") is not None for s, v in zip(scored, vals)):
            return None
        return sum(vals) / len(vals)
    pairs = sorted({k[1:] for k in runs})
    scores = {(agg, p): score(agg, p) for agg in ("AVG", "GMA") for p in pairs}
    out: dict = {"seeds": scored}
    for agg in ("AVG", "GMA"):
        ok = [p for p in pairs if scores[agg, p] is not None]
        if not ok:
            return None
        out[agg] = max(ok, key=lambda p: scores[agg, p])   # max keeps the first of equals: the smaller rates
    both = [p for p in pairs if scores["AVG", p] is not None and scores["GMA", p] is not None]
    out["shared"] = max(both, key=lambda p: scores["AVG", p] + scores["GMA", p]) if both else None
    return out


def selected_rows(rows: list[dict], picks: dict, choice: str) -> list[dict]:
    """The runs at ``choice``'s picks ("own": AVG at AVG's pair and GMA at GMA's; "shared": both at the shared one)."""
    want = {agg: picks[agg if choice == "own" else "shared"] for agg in ("AVG", "GMA")}
    return [r for r in rows if want[r["aggregation"]] == (r["server_lr"], r["lr"])]


def print_table10_selected(rows: list[dict], meta: dict) -> None:
    """Table 2's FedAvg row on FMNIST 2-class, 10 clients, from Table 10's runs: each aggregation at its own grid
    pick and both at the shared pick, under each selection rule; one table per grid (client momentum, rounds) as
    print_table10 splits them. Best test accuracy (the paper's Table 2 metric) and last-10 mean at the picks,
    GMA − AVG seed by seed, beside the paper's Table 2 row. The "mean" rule scores the very runs it then reports
    (on the held-out splits, not the test set), which flatters AVG and GMA alike; "seed0" is the config's rule."""
    print(*results.provenance_comments(meta), sep="\n")
    p = GMA_TABLE[("fashionmnist", "label", 10)]["fedavg"]
    grids = sorted({(momentum_of(r), r.get("rounds")) for r in rows}, key=lambda g: (-g[0], -(g[1] or 0)))
    for m, n in grids:
        grid = [r for r in rows if (momentum_of(r), r.get("rounds")) == (m, n)]
        if len(grids) > 1:
            print(f"\nclient momentum {m:g}, {n} rounds ({results.scale_label(meta, grid_rounds=n)})\n")
        print("| selection on the clients' held-out splits | pair (client / server lr) | seeds | AVG best | GMA best | "
              "GMA − AVG, seed by seed | beyond its sd? | AVG last 10 | GMA last 10 | "
              "paper Table 2 AVG / GMA (GMA − AVG) |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for rule, words in SELECTION_RULES.items():
            picks = held_out_picks(grid, rule)
            for choice in ("own", "shared"):
                if picks is None or (choice == "shared" and picks["shared"] is None):
                    continue
                mine = selected_rows(grid, picks, choice)
                best, last = (with_diverged(mine, ["aggregation"], k) for k in ("best_global_acc", "last10_global_acc"))
                d = results.paired_difference(mine, [], "aggregation", "GMA", "AVG", "best_global_acc").get((), {})
                gap, beyond = lead_cells(d) if d else ("—", "—")
                pair = (f"AVG {picks['AVG'][1]:g} / {picks['AVG'][0]:g}, GMA {picks['GMA'][1]:g} / {picks['GMA'][0]:g}"
                        if choice == "own" else f"{picks['shared'][1]:g} / {picks['shared'][0]:g} (shared)")
                print(f"| {words} | {pair} | {len({r['seed'] for r in mine})} | {show(*cell(best, ('AVG',)))} | "
                      f"{show(*cell(best, ('GMA',)))} | {gap} | {beyond} | {show(*cell(last, ('AVG',)))} | "
                      f"{show(*cell(last, ('GMA',)))} | {p[0]} / {p[1]} ({p[1] - p[0]:+.2f}) |")


# how a Tables 2-3 row names its setting: the dataset, then the skew in words, then the clients
SKEW_NAMES = {"label": "2-class", "iid": "iid", "quantity": "quantity skew",
              "dirichlet": "Dirichlet label skew",
              "feature": "FedCMNIST feature skew (iid labels), each client's own colours",
              "mixed": "FedCMNIST mixed skew, each client's own colours",
              "feature-shared": "FedCMNIST feature skew (iid labels), one shared colour map reversed at test (ours, not "
                                "a paper row)",
              "mixed-shared": "FedCMNIST mixed skew, one colour map shared by the training clients and reversed at test "
                              "(ours, not a paper row)"}


def setting_name(dataset: str, skew: str, clients: int) -> str:
    """'FMNIST, 2-class, 500 clients'; FedCMNIST is MNIST by construction, so it is not named twice."""
    ds = {"mnist": "MNIST", "fashionmnist": "FMNIST", "cifar10": "CIFAR-10"}.get(dataset, dataset)
    words = SKEW_NAMES.get(skew, skew)
    return f"{words}, {clients} clients" if words.startswith("FedCMNIST") else f"{ds}, {words}, {clients} clients"


def print_tables2_3(rows: list[dict], meta: dict) -> None:
    # a row of the table: setting, algorithm, how the pair was chosen, and the pair itself when AVG and GMA
    # share it ("own": each its own pick, shown in the cells)
    for r in rows:
        r["pair"] = ("own" if r["lr_choice"] == "own" else f"{r['lr']:g} / {r['server_lr']:g}") + (
            "" if momentum_of(r) == 0.9 else f", client momentum {momentum_of(r):g}")
    by = ["dataset", "skew", "clients", "algorithm", "lr_choice", "pair"]
    best = with_diverged(rows, by + ["aggregation"], "best_global_acc")
    last = with_diverged(rows, by + ["aggregation"], "last10_global_acc")
    lead = results.paired_difference(rows, by, "aggregation", "GMA", "AVG", "best_global_acc")
    picks = {tuple(r[k] for k in by + ["aggregation"]): f" at {r['lr']:g} / {r['server_lr']:g}" for r in rows
             if r["lr_choice"] == "own"}
    print(*results.provenance_comments(meta), sep="\n")
    print("| setting | algorithm | lr pair (client / server) | seeds | AVG best | GMA best | GMA − AVG, seed by seed | "
          "beyond its sd? | AVG last 10 | GMA last 10 | paper AVG / GMA (GMA − AVG) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    skews, algos = list(SKEW_NAMES), ["fedavg", "fedprox", "fedadam", "fedyogi"]

    def order(key: tuple) -> tuple:   # the paper's order: label skew first, MNIST before FMNIST, FedAvg first
        k = dict(zip(by, key))
        return (skews.index(k["skew"]) if k["skew"] in skews else len(skews), k["dataset"] != "mnist", k["dataset"],
                -k["clients"], algos.index(k["algorithm"]) if k["algorithm"] in algos else len(algos), str(key))
    for key in sorted(lead, key=order):
        k = dict(zip(by, key))
        show_ = {agg: show(*cell(best, (*key, agg))) + picks.get((*key, agg), "") for agg in ("AVG", "GMA")}
        d = lead[key]
        gap, beyond = lead_cells(d)
        p = GMA_TABLE.get((k["dataset"], k["skew"], k["clients"]), {}).get(k["algorithm"])
        paper = "—" if p is None else f"{p[0]} / {p[1]} ({p[1] - p[0]:+.2f})"
        pair = k["pair"] if k["lr_choice"] != "own" else "each its own pick"
        if beyond == "yes":
            beyond = f"yes, {'GMA' if d['mean'] > 0 else 'AVG'} ahead"
        print(f"| {setting_name(k['dataset'], k['skew'], k['clients'])} | {algorithm_name(k['algorithm'], meta)} | "
              f"{pair} ({k['lr_choice']}) | {d['n']} | {show_['AVG']} | {show_['GMA']} | {gap} | {beyond} | "
              f"{show(*cell(last, (*key, 'AVG')))} | {show(*cell(last, (*key, 'GMA')))} | {paper} |")


# FedCMNIST's two constructions (notebook 03, section 6): each training client's own colour map (the paper's
# text), or one map shared by every training client and reversed on the test set (coloured MNIST's way)
COLOUR_MAPS = {"feature": "own per client", "mixed": "own per client",
               "feature-shared": "shared, reversed at test", "mixed-shared": "shared, reversed at test"}


def parts_running(meta: dict, skews) -> dict:
    """``meta`` with only the commands whose ``settings`` ran one of ``skews`` (a command that recorded no
    settings stays): the provenance of one slice of a table that several commands wrote."""
    def ran(p: dict) -> bool:
        settings = (p.get("settings") or {}).get("settings")
        return settings is None or any(s[1] in skews for s in settings)
    return results.keep_parts(meta, ran)


def print_colour(rows: list[dict], meta: dict) -> None:
    """FedCMNIST rows of Tables 2-3: the clients' held-out accuracy (the colours of their training data) beside
    the test set's (colours no client saw, or the shared map reversed), and the fall from one to the other, seed
    by seed: how far each aggregation learnt colour instead of shape. Best over the rounds for every row, and
    the last-10 means where the row has the held-out one (rows made before last10_local_acc existed do not)."""
    rows = [r for r in rows if r["skew"] in COLOUR_MAPS]
    if not rows:
        print("(no FedCMNIST rows yet: run notebook 03 with -p settings \"[[mnist, mixed, 500], [mnist, mixed-shared, 500]]\")")
        return
    by = ["dataset", "skew", "clients", "algorithm", "lr_choice", "lr", "server_lr", "aggregation"]
    runs: dict[tuple, dict[int, dict]] = {}
    for r in rows:
        runs.setdefault(tuple(r[k] for k in by), {}).setdefault(r["seed"], {})[r["metric"]] = r["value"]

    def fmt(vals: list[float]) -> str:
        m, sd = mean_std(vals)
        return f"{m:.2f}" + (f" ± {sd:.2f}" if len(vals) > 1 else "")

    def trio(seeds: dict[int, dict], ind: str, ood: str) -> list[str]:
        """held-out, test and held-out minus test (seed by seed), or why not."""
        if any(v.get(ind) is None for v in seeds.values()) and all(v.get(ood) is not None for v in seeds.values()):
            return ["—", fmt([v[ood] for v in seeds.values()]), "—"]   # an older row without this held-out metric
        ok = [v for v in seeds.values() if v.get(ind) is not None and v.get(ood) is not None]
        if len(ok) < len(seeds):
            return [f"{len(seeds) - len(ok)} of {len(seeds)} diverged"] * 3
        return [fmt([v[ind] for v in ok]), fmt([v[ood] for v in ok]), fmt([v[ind] - v[ood] for v in ok])]

    print(*results.provenance_comments(parts_running(meta, COLOUR_MAPS)), sep="\n")
    print("| FedCMNIST | colour map | clients | algorithm | lr pair | aggregation | seeds | held-out best | test best | "
          "fall (best) | held-out last 10 | test last 10 | fall (last 10) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for key in sorted(runs, key=lambda k: (k[2], k[1].endswith("shared"), k[1], k[3], str(k[4:]))):
        k, seeds = dict(zip(by, key)), runs[key]
        cells = trio(seeds, "best_local_acc", "best_global_acc") + trio(seeds, "last10_local_acc", "last10_global_acc")
        print(f"| {k['skew'].removesuffix('-shared')} skew | {COLOUR_MAPS[k['skew']]} | {k['clients']} | {k['algorithm']} | "
              f"{k['lr']:g} / {k['server_lr']:g} ({k['lr_choice']}) | {k['aggregation']} | {len(seeds)} | "
              + " | ".join(cells) + " |")
    # who falls further: GMA's fall minus AVG's, seed by seed, where both ran the same seeds and neither diverged
    notes = []
    for key in sorted({k[:-1] for k in runs}, key=str):
        a, g = runs.get((*key, "AVG")), runs.get((*key, "GMA"))
        if not a or not g or set(a) != set(g):
            continue
        words = []
        for ind, ood, what in (("best_local_acc", "best_global_acc", "best"), ("last10_local_acc", "last10_global_acc",
                                                                              "last 10")):
            if any(v.get(m) is None for v in (*a.values(), *g.values()) for m in (ind, ood)):
                continue
            d = [(g[s][ind] - g[s][ood]) - (a[s][ind] - a[s][ood]) for s in sorted(a)]
            m, sd = mean_std(d)
            words.append(f"{what} {m:+.2f}" + (f" ± {sd:.2f}" if len(d) > 1 else "") +
                         f" (GMA falls further in {sum(x > 0 for x in d)} of {len(d)} seeds)")
        if words:
            k = dict(zip(by, key))
            notes.append(f"- {k['skew']} {k['clients']} {k['algorithm']}: GMA's fall minus AVG's, seed by seed: "
                         + "; ".join(words))
    print(*([""] + notes if notes else []), sep="\n")


def spread(values: list[float] | None) -> str:
    """'mean ± sample sd' to 3 places ('mean' alone for one value, '—' for none)."""
    if not values:
        return "—"
    m, sd = mean_std(values)
    return f"{m:.3f}" + (f" ± {sd:.3f}" if len(values) > 1 else "")


def print_mask_probe(rows: list[dict], meta: dict) -> None:
    groups: dict[tuple, dict[int, list[dict]]] = {}
    for r in rows:
        groups.setdefault((r["dataset"], r["clients"], r["trajectory"], r["lr"]), {}).setdefault(r["seed"], []).append(r)
    print(*results.provenance_comments(meta), sep="\n")
    print("| setting | client lr | trajectory | seeds | rounds | below τ | mask mean | step ratio | summed-step ratio "
          "| summed-step cosine |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (ds, n, traj, lr), by_seed in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][0], kv[0][2])):
        per_round, final, stops = {}, {}, []
        for seed, rs in by_seed.items():
            stops += [int(r["value"]) for r in rs if r["metric"] == "diverged_round"]
            last = max((r["round"] for r in rs if r["metric"] == "cum_ratio"), default=None)
            for m in ("below_tau", "mask_mean", "step_ratio"):
                v = [r["value"] for r in rs if r["metric"] == m]
                if v:
                    per_round.setdefault(m, []).append(sum(v) / len(v))
            for m in ("cum_ratio", "cum_cos"):
                final.setdefault(m, []).extend(r["value"] for r in rs if r["metric"] == m and r["round"] == last)
        rounds = max((r["round"] for rs in by_seed.values() for r in rs if r["metric"] == "cum_ratio"), default=0)
        note = f" (diverged at round {min(stops)})" if stops else ""
        print(f"| {setting_name(ds, 'label', n)} | {lr:g} | {traj} | {len(by_seed)} | {rounds}{note} | "
              + " | ".join(spread(per_round.get(m)) for m in ("below_tau", "mask_mean", "step_ratio")) + " | "
              + " | ".join(spread(final.get(m)) for m in ("cum_ratio", "cum_cos")) + " |")


def print_rate_probe(rows: list[dict], meta: dict) -> None:
    """One line per (inputs, batch, client rate, momentum): best and final accuracy over seeds, or the divergences."""
    groups: dict[tuple, dict[str, list]] = {}
    for r in rows:
        k = (r["dataset"], r["clients"], r["inputs"], r["batch_size"], r["lr"], r["momentum"], r["server_lr"], r["rounds"])
        groups.setdefault(k, {}).setdefault(r["metric"], []).append(r["value"])
    print(*results.provenance_comments(meta), sep="\n")
    print("| setting | inputs | batch | client lr | momentum | server lr | rounds | seeds | best | final | diverged |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for (ds, n, inputs, bs, lr, mom, g, rounds), m in sorted(groups.items()):
        stops = [int(v) for v in m.get("diverged_round", []) if v is not None]
        seeds = len(m.get("diverged_round", []))
        best, final = ([v for v in m.get(k, []) if v is not None] for k in ("best_global_acc", "final_global_acc"))
        fmt = lambda v: "—" if not v else (f"{v[0]:.2f}" if len(v) == 1 else "{:.2f} ± {:.2f}".format(*mean_std(v)))
        print(f"| {setting_name(ds, 'label', n)} | {inputs} | {bs} | {lr:g} | {mom:g} | {g:g} | {rounds} | {seeds} | {fmt(best)} | "
              f"{fmt(final)} | {f'{len(stops)} of {seeds}, round {min(stops)}' if stops else '–'} |")


def print_rate_probe_grid(rows: list[dict], meta: dict) -> None:
    """The rate probe as the README lays it out: a row per (client momentum, inputs, batch), a column per client
    rate; each cell "best / final" (mean over seeds), or the round at which a run diverged."""
    cells: dict[tuple, dict[str, list]] = {}
    for r in rows:
        k = (r["momentum"], r["inputs"], r["batch_size"], r["lr"])
        cells.setdefault(k, {}).setdefault(r["metric"], []).append(r["value"])
    lrs = sorted({k[3] for k in cells})
    print(*results.provenance_comments(meta), sep="\n")
    print("| client momentum | inputs | batch | " + " | ".join(f"rate {lr:g}" for lr in lrs) + " |")
    print("|---|---|---|" + "---|" * len(lrs))
    order = sorted({k[:3] for k in cells}, key=lambda k: (-k[0], k[1] != "standardized", k[1], k[2]))
    for mom, inputs, bs in order:
        texts = []
        for lr in lrs:
            m = cells.get((mom, inputs, bs, lr))
            if m is None:
                texts.append("—")
                continue
            stops = [int(v) for v in m.get("diverged_round", []) if v is not None]
            best, final = ([v for v in m.get(k, []) if v is not None] for k in ("best_global_acc", "final_global_acc"))
            texts.append(f"diverged, round {min(stops)}" if stops else
                         f"{sum(best) / len(best):.2f} / {sum(final) / len(final):.2f}" if best and final else "—")
        name = f"{mom:g} (the paper's)" if mom == 0.9 and (mom, inputs, bs) == order[0] else f"{mom:g}"
        print(f"| {name} | {inputs} | {bs} | " + " | ".join(texts) + " |")


def curve_stats(curve: dict[int, float], early: int, mid: int, level: float) -> dict:
    """One run's curve (round -> accuracy): best by round ``early`` and ``mid``, best, last, first round >= ``level``."""
    rounds = sorted(curve)
    upto = lambda n: max((curve[t] for t in rounds if t <= n), default=None)
    return {"early": upto(early), "mid": upto(mid), "best": max(curve.values()), "last": curve[rounds[-1]],
            "reach": next((t for t in rounds if curve[t] >= level), None), "end": rounds[-1]}


def steadiness(curve: dict[int, float], after: int) -> dict | None:
    """How much one run's curve swings after round ``after``: the population sd of its accuracies there and the
    largest fall from one evaluated round to the next (0 when it never falls). None for a run that stops before
    (it diverged) or evaluates fewer than two rounds after ``after``."""
    tail = [curve[t] for t in sorted(curve) if t > after]
    if len(tail) < 2:
        return None
    mean = sum(tail) / len(tail)
    return {"sd": (sum((a - mean) ** 2 for a in tail) / len(tail)) ** 0.5,
            "drop": max(0.0, max(a - b for a, b in zip(tail, tail[1:])))}


def print_steadiness(curves: dict[tuple, dict[int, float]], after: int) -> None:
    """Per (grid, cell, aggregation), the mean over seeds of ``steadiness``: a best-of-all-rounds metric rewards a
    curve that swings, so a steadier aggregation can lose on "best" and win on the last rounds."""
    st = {k: s for k, c in curves.items() if (s := steadiness(c, after)) is not None and max(c) >= k[1]}
    cells = sorted({k[:4] for k in st}, key=lambda c: (-c[0], -c[1], c[2], c[3]))
    if not cells:
        return
    print(f"\nHow much each curve swings after round {after}: the sd of its accuracies there (a curve still climbing "
          f"counts too) and its largest fall from one round to the next; runs that reached their last round, mean over "
          f"the seeds both aggregations ran:\n")
    print("| momentum | rounds | server lr | client lr | seeds | AVG sd | GMA sd | AVG largest one-round fall "
          "| GMA largest one-round fall |")
    print("|---|---|---|---|---|---|---|---|---|")
    for c in cells:
        both = sorted(s for (*k, agg, s) in st if tuple(k) == c and agg == "AVG" and (*c, "GMA", s) in st)
        if not both:
            continue
        m = lambda agg, what: sum(st[(*c, agg, s)][what] for s in both) / len(both)
        print(f"| {c[0]:g} | {c[1]} | {c[2]:g} | {c[3]:g} | {', '.join(map(str, both))} | {m('AVG', 'sd'):.2f} | "
              f"{m('GMA', 'sd'):.2f} | {m('AVG', 'drop'):.2f} | {m('GMA', 'drop'):.2f} |")


def print_table10_curves(rows: list[dict], meta: dict, early: int = 15, mid: int = 50, level: float = 80.0) -> None:
    """Where each run's best comes from: per (grid, cell, aggregation), seed by seed, the best by round ``early``
    (the reduced grid's length) and ``mid``, the best over all rounds, the last round's accuracy and the first
    round at ``level`` % or more ("–": never); then GMA − AVG of each, mean over the seeds both ran. A curve that
    ends early (the run diverged: no accuracy after that round) shows its last evaluated round as "(round N)"."""
    print(*results.provenance_comments(meta), sep="\n")
    curves: dict[tuple, dict[int, float]] = {}
    for r in rows:
        if r["metric"] == "global_acc" and r["value"] is not None:
            key = (momentum_of(r), r["rounds"], r["server_lr"], r["lr"], r["aggregation"], r["seed"])
            curves.setdefault(key, {})[int(r["round"])] = float(r["value"])
    stats = {k: curve_stats(c, early, mid, level) for k, c in curves.items()}
    cells = sorted({k[:4] for k in stats}, key=lambda c: (-c[0], -c[1], c[2], c[3]))
    print(f"| momentum | rounds | server lr | client lr | aggregation | seeds | best by round {early} | best by round {mid} "
          f"| best | last round | first round ≥ {level:g} % |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    fmt = lambda vs: " / ".join("–" if v is None else f"{v:.1f}" if isinstance(v, float) else str(v) for v in vs)
    for c in cells:
        seeds = {agg: sorted(k[5] for k in stats if k[:5] == (*c, agg)) for agg in ("AVG", "GMA")}
        for agg in ("AVG", "GMA"):
            if seeds[agg]:
                st = [{**x, "last": x["last"] if x["end"] >= c[1] else f"{x['last']:.1f} (round {x['end']})"}
                      for x in (stats[(*c, agg, s)] for s in seeds[agg])]
                print(f"| {c[0]:g} | {c[1]} | {c[2]:g} | {c[3]:g} | {agg} | {', '.join(map(str, seeds[agg]))} | "
                      + " | ".join(fmt([x[m] for x in st]) for m in ("early", "mid", "best", "last", "reach")) + " |")
        both = [s for s in seeds["AVG"] if s in seeds["GMA"]]
        if both:
            pair = lambda m, s: (stats[(*c, "GMA", s)][m], stats[(*c, "AVG", s)][m])
            d = {m: [g - a for g, a in (pair(m, s) for s in both) if None not in (g, a)] for m in ("early", "mid", "best", "last")}
            print(f"| {c[0]:g} | {c[1]} | {c[2]:g} | {c[3]:g} | GMA − AVG | {', '.join(map(str, both))} | "
                  + " | ".join("{:+.2f}".format(sum(v) / len(v)) if v else "—" for v in d.values()) + " | |")
    print("", *paper_round_fit(curves), sep="\n")
    print_steadiness(curves, mid)


def paper_round_fit(curves: dict[tuple, dict[int, float]]) -> list[str]:
    """Did the paper stop earlier? For each grid (momentum, rounds), the round R at which the mean over seeds of
    the best-so-far accuracy is closest (root mean square over the cells the paper has) to the paper's Table 10,
    with GMA − AVG at that R beside the paper's: one line per grid at the paper's client momentum (0.9). A run that
    diverged counts with its best before it stopped."""
    lines = []
    for m, n in sorted({k[:2] for k in curves if k[0] == 0.9}, key=lambda g: -g[1]):
        cells = sorted({k[2:5] for k in curves if k[:2] == (m, n)})
        paper = {c: GMA_TABLE10["mean" if c[2] == "AVG" else "gma"].get(c[0]) for c in cells}
        paper = {c: p[GMA_TABLE10_CLIENT_LRS.index(c[1])] for c, p in paper.items() if p and c[1] in GMA_TABLE10_CLIENT_LRS}
        if not paper:
            continue
        def ours(c, r):
            runs = [v for k, v in curves.items() if k[:5] == (m, n, *c)]
            return sum(max((a for t, a in v.items() if t <= r), default=0.0) for v in runs) / len(runs)
        fit = min(range(1, n + 1), key=lambda r: sum((ours(c, r) - p) ** 2 for c, p in paper.items()))
        rms = (sum((ours(c, fit) - p) ** 2 for c, p in paper.items()) / len(paper)) ** 0.5
        leads = [f"server {g:g} / client {l:g}: {ours((g, l, 'GMA'), fit) - ours((g, l, 'AVG'), fit):+.2f} "
                 f"(paper {paper[g, l, 'GMA'] - paper[g, l, 'AVG']:+.2f})"
                 for g, l in sorted({c[:2] for c in paper}) if (g, l, "AVG") in paper and (g, l, "GMA") in paper]
        lines.append(f"momentum {m:g}, {n} rounds: the paper's {len(paper)} values are closest to our best-so-far at round "
                     f"{fit} (rms {rms:.2f} points); GMA − AVG there: " + "; ".join(leads))
        # one R for every cell can be pulled by a few: say, cell by cell, when our mean best-so-far first reaches the
        # paper's number ("not by R" when it never does: the paper ran longer, or its runs learn faster)
        def reach(c):
            r = next((r for r in range(1, n + 1) if ours(c, r) >= paper[c]), None)
            return f"round {r}" if r else f"not by {n} ({ours(c, n):.1f} < {paper[c]:.2f})"
        lines.append("first round at which our mean best-so-far reaches the paper's value, AVG / GMA: " + "; ".join(
            f"server {g:g} / client {l:g}: " + " / ".join(reach((g, l, a)) if (g, l, a) in paper else "–"
                                                           for a in ("AVG", "GMA"))
            for g, l in sorted({c[:2] for c in paper})))
    return lines


def print_quick_seeds(rows: list[dict], meta: dict) -> None:
    """scripts/gma_quick_seeds.py's summary."""
    results.load_script("gma_quick_seeds").print_summary(rows, meta)


def print_participation(rows: list[dict], meta: dict) -> None:
    """Tables 4-5 (scripts/gma_appendix.py): per share of clients taking part and warm-up length, the mean
    accuracy of the participating and the non-participating clients, AVG and GMA over the trials, and GMA − AVG
    seed by seed beside the paper's mean of 3 trials."""
    by = ["client_fraction", "warmup_rounds"]
    print(*results.provenance_comments(meta), sep="\n")
    print("| clients taking part | warm-up rounds | seeds | participating AVG | GMA | GMA − AVG | beyond its sd? | "
          "non-participating AVG | GMA | GMA − AVG | beyond its sd? |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    cells = {}
    for metric in ("participating_acc", "nonparticipating_acc"):
        cells[metric] = (with_diverged(rows, by + ["aggregation"], metric),
                         results.paired_difference(rows, by, "aggregation", "GMA", "AVG", metric))
    for key in sorted(cells["participating_acc"][1]):
        out = []
        for metric in ("participating_acc", "nonparticipating_acc"):
            st, lead = cells[metric]
            out += [show(*cell(st, (*key, "AVG"))), show(*cell(st, (*key, "GMA"))), *lead_cells(lead[key])]
        d = cells["participating_acc"][1][key]
        print(f"| {key[0]:.0%} | {key[1]} | {d['n'] + d['missing']} | " + " | ".join(out) + " |")
    for frac, (name, p) in ((0.5, ("Table 4", GMA_TABLE4)), (0.2, ("Table 5", GMA_TABLE5))):
        print(f"| paper, {name} ({frac:.0%}) | ? | 3 | {p[0]} | {p[1]} | {p[1] - p[0]:+.2f} | | {p[2]} | {p[3]} | "
              f"{p[3] - p[2]:+.2f} | |")


def last10_and_best(rows: list[dict], by: list[str]) -> tuple[dict, dict, dict]:
    """Per group of ``by``: AVG's and GMA's last-10 means and bests over the seeds (with_diverged), and GMA − AVG of
    the last-10 mean seed by seed (the metric of the paper's Tables 7-9 and App. E)."""
    return (with_diverged(rows, by + ["aggregation"], "last10_global_acc"),
            with_diverged(rows, by + ["aggregation"], "best_global_acc"),
            results.paired_difference(rows, by, "aggregation", "GMA", "AVG", "last10_global_acc"))


def print_convex(rows: list[dict], meta: dict) -> None:
    """App. E (scripts/gma_appendix.py): logistic regression, per data split and client rate, the mean test
    accuracy over the last 10 rounds (the paper's metric) and the best, AVG and GMA, beside the paper's."""
    by = ["skew", "lr", "rounds"]
    last, best, lead = last10_and_best(rows, by)
    print(*results.provenance_comments(meta), sep="\n")
    print("| data | client lr | rounds | seeds | AVG last 10 | GMA last 10 | GMA − AVG, seed by seed | "
          "beyond its sd? | "
          "AVG best | GMA best | paper AVG / GMA (GMA − AVG) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for key in sorted(lead):
        p = GMA_CONVEX.get(key[0])
        paper = "—" if p is None else f"{p[0]} / {p[1]} ({p[1] - p[0]:+.2f})"
        print(f"| {key[0]} | {key[1]:g} | {key[2]} | {lead[key]['n'] + lead[key]['missing']} | {show(*cell(last, (*key, 'AVG')))} | "
              f"{show(*cell(last, (*key, 'GMA')))} | {' | '.join(lead_cells(lead[key]))} | "
              f"{show(*cell(best, (*key, 'AVG')))} | {show(*cell(best, (*key, 'GMA')))} | {paper} |")


# the paper's Tables 8, 9 and 6 (FMNIST non-iid, every client every round) by the value varied, as (AVG, GMA)
PAPER_ABLATIONS = {"clients": ("Table 8", GMA_TABLE8), "epochs": ("Table 9", GMA_TABLE9),
                   "momentum": ("Table 6", {0.0: GMA_TABLE6["fashionmnist", "non-iid"][:2],
                                            0.9: GMA_TABLE6["fashionmnist", "non-iid"][2:]})}


# the ablation setting's own value in each table: 10 clients, one local epoch, client momentum 0.9 are one run
ABLATION_BASE = {"clients": 10, "epochs": 1, "momentum": 0.9}


def with_shared_runs(rows: list[dict]) -> list[dict]:
    """Tables 8, 9 and 6's rows (not tau) with each table's base point filled in from another table where it has
    none: N = 10, E = 1 and momentum 0.9 are the same runs (gma_ablations.py trains them once), so Table 9 gets its
    E = 1 point from Table 8's N = 10 runs without a rerun. A copied row says where it came from (``shared_from``,
    e.g. "clients 10"); the table only shows a copy for a table that has rows of its own."""
    rows = [r for r in rows if r["varied"] != "tau"]
    out = list(rows)
    pairs = {(r["lr"], r["server_lr"], r["rounds"]) for r in rows}
    for pair in sorted(pairs):
        mine = [r for r in rows if (r["lr"], r["server_lr"], r["rounds"]) == pair]
        base = {t: [r for r in mine if r["varied"] == t and r["value_varied"] == v] for t, v in ABLATION_BASE.items()}
        source = max(base, key=lambda t: len({r["seed"] for r in base[t]}))   # the base runs with the most seeds
        for table, value in ABLATION_BASE.items():
            if base[table] or not base[source] or not any(r["varied"] == table for r in mine):
                continue
            out += [{**r, "varied": table, "value_varied": value,
                     "shared_from": f"{source} {ABLATION_BASE[source]:g}"} for r in base[source]]
    return out


def per_seed(rows: list[dict], varied: str, metric: str = "last10_global_acc") -> dict[tuple, dict]:
    """One sweep of ablations_full (``varied``: clients, epochs, momentum or tau) seed by seed, for plots:
    {(value, lr, server_lr, rounds): {aggregation: {seed: value}}}, None where the run diverged. Tables 8, 9 and 6
    get their base point from another table's runs (with_shared_runs: Table 9's E = 1 is Table 8's N = 10); the
    tau sweep's one AVG run per seed (AVG does not read tau) stands beside GMA at every tau, as in fig3d_stats."""
    if varied not in (*ABLATION_BASE, "tau"):
        raise ValueError(f"varied: got {varied!r}; one of {', '.join((*ABLATION_BASE, 'tau'))}")
    mine = [r for r in (rows if varied == "tau" else with_shared_runs(rows))
            if r["varied"] == varied and r["metric"] == metric]
    taus = sorted({r["value_varied"] for r in mine if r["aggregation"] == "GMA"}) if varied == "tau" else []
    out: dict[tuple, dict] = {}
    for r in mine:
        at = taus if varied == "tau" and r["aggregation"] == "AVG" else [r["value_varied"]]
        for v in at:
            out.setdefault((v, r["lr"], r["server_lr"], r["rounds"]), {}).setdefault(
                r["aggregation"], {})[r["seed"]] = None if r["value"] is None else float(r["value"])
    return dict(sorted(out.items()))


def print_ablations_full(rows: list[dict], meta: dict) -> None:
    """Tables 8, 9 and 6 (scripts/gma_ablations.py): per table and value, the last-10 mean (the paper's metric)
    and the best, AVG and GMA over the seeds, GMA − AVG seed by seed, beside the paper's values. A table's base
    point that another table's runs supply (with_shared_runs) says so in its value column."""
    by = ["varied", "value_varied", "lr", "server_lr", "rounds"]
    rows = with_shared_runs(rows)   # tau: print_fig3d
    shared = {(r["varied"], r["value_varied"], r["lr"], r["server_lr"], r["rounds"]): r["shared_from"]
              for r in rows if r.get("shared_from")}
    last, best, lead = last10_and_best(rows, by)
    print(*results.provenance_comments(tau_parts(meta, False)), sep="\n")
    print("| table | varied | value | client / server lr | seeds | AVG last 10 | GMA last 10 | GMA − AVG, seed by seed | "
          "beyond its sd? | AVG best | GMA best | paper AVG / GMA (GMA − AVG) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    order = {t: i for i, t in enumerate(PAPER_ABLATIONS)}
    for key in sorted(lead, key=lambda k: (order.get(k[0], 9), k[1:])):
        table, paper_values = PAPER_ABLATIONS.get(key[0], ("—", {}))
        p = paper_values.get(key[1])
        paper = "—" if p is None else f"{p[0]} / {p[1]} ({p[1] - p[0]:+.2f})"
        value = f"{key[1]:g}" + (f" (the {shared[key]} runs)" if key in shared else "")
        print(f"| {table} | {key[0]} | {value} | {key[2]:g} / {key[3]:g} | {lead[key]['n'] + lead[key]['missing']} | "
              f"{show(*cell(last, (*key, 'AVG')))} | {show(*cell(last, (*key, 'GMA')))} | {' | '.join(lead_cells(lead[key]))} | "
              f"{show(*cell(best, (*key, 'AVG')))} | {show(*cell(best, (*key, 'GMA')))} | {paper} |")


def tau_parts(meta: dict, tau: bool) -> dict:
    """``meta`` with only the commands that ran the tau table (``tau=True``) or only the others: ablations_full.csv
    holds both, and each printer shows the commands behind its own rows."""
    def ran(m: dict) -> set:
        words = str(m.get("command", "")).split()
        i = words.index("--tables") + 1 if "--tables" in words else len(words)
        tables = set()
        while i < len(words) and not words[i].startswith("--"):
            tables.add(words[i]); i += 1
        return tables or {"tau", "other"}   # no --tables: the defaults ran every table
    keep = (lambda t: "tau" in t) if tau else (lambda t: bool(t - {"tau"}))   # a command can have run both kinds
    return results.keep_parts(meta, lambda m: keep(ran(m)))


def fig3d_stats(rows: list[dict]) -> tuple[dict, dict, dict]:
    """The tau table's (last, best, lead) as last10_and_best gives them, keyed (tau, lr, server_lr, rounds[, agg]):
    AVG ran once per seed (it does not read tau), so its run is paired with GMA's at every tau."""
    tau_rows = [r for r in rows if r["varied"] == "tau"]
    taus = sorted({r["value_varied"] for r in tau_rows if r["aggregation"] == "GMA"})
    paired = [r for r in tau_rows if r["aggregation"] == "GMA"]
    paired += [{**r, "value_varied": t} for r in tau_rows if r["aggregation"] == "AVG" for t in taus]
    return last10_and_best(paired, ["value_varied", "lr", "server_lr", "rounds"])


def fig3d_vs_tau0(rows: list[dict]) -> dict:
    """GMA at each τ minus GMA at τ = 0 of the same seed (last-10 mean), as paired_difference gives it, keyed
    (tau, lr, server_lr, rounds). At τ = 0 the mask is all ones, so that run is AVG's in exact arithmetic, and it ran
    on the same device as the seed's other τ: a comparison that a seed sweep split across devices cannot blur."""
    gma = [r for r in rows if r["varied"] == "tau" and r["aggregation"] == "GMA"]
    taus = sorted({r["value_varied"] for r in gma})
    paired = [{**r, "ref": "tau"} for r in gma]
    paired += [{**r, "value_varied": t, "ref": "zero"} for r in gma if r["value_varied"] == 0 for t in taus]
    return results.paired_difference(paired, ["value_varied", "lr", "server_lr", "rounds"], "ref", "tau", "zero",
                                     "last10_global_acc")


def print_fig3d(rows: list[dict], meta: dict) -> None:
    """Fig. 3d on FMNIST (scripts/gma_ablations.py --tables tau): GMA's last-10 mean (and best) at each threshold
    tau over the seeds, beside the one AVG run of the same seed, and GMA − AVG seed by seed. At tau = 0 every
    coordinate keeps its full weight, so GMA's lead there must be exactly 0."""
    last, best, lead = fig3d_stats(rows)
    if not any(k[-1] == "GMA" for k in last):
        print("no Fig. 3d rows in this table yet: python scripts/gma_ablations.py --tables tau writes them")
        return
    print(*results.provenance_comments(tau_parts(meta, True)), sep="\n")
    zero = fig3d_vs_tau0(rows)
    print("| τ | client / server lr | seeds | GMA last 10 | AVG last 10 | GMA − AVG, seed by seed | beyond its sd? | "
          "GMA − GMA at τ = 0, seed by seed | GMA best | AVG best |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for key in sorted(k[:-1] for k in last if k[-1] == "GMA"):   # every tau GMA ran at, with AVG's run or "—"
        d = lead.get(key, {"mean": None, "missing": 0, "n": 0})
        seeds = max(d["n"] + d["missing"], cell(last, (*key, "GMA"))[2], cell(last, (*key, "AVG"))[2])

        def of(stats: dict, agg: str) -> str:   # a mean over fewer seeds than the row's says how many
            m, sd, n, note = cell(stats, (*key, agg))
            return show(m, sd, n, note) + (f" ({n} of {seeds} seeds)" if m is not None and n < seeds else "")
        print(f"| {key[0]:g} | {key[1]:g} / {key[2]:g} | {seeds} | {of(last, 'GMA')} | {of(last, 'AVG')} | "
              f"{' | '.join(lead_cells(d))} | {lead_cells(zero.get(key, {'mean': None, 'missing': 0}))[0]} | "
              f"{of(best, 'GMA')} | {of(best, 'AVG')} |")
    best_tau = fig3d_best(rows)
    if best_tau:
        tau, mean, seeds, partial = best_tau
        verb = "has" if len(partial) == 1 else "have"
        note = f" over seeds {', '.join(map(str, seeds))}" + (
            f" (τ = {', '.join(f'{t:g}' for t in partial)} {verb} fewer seeds so far, left out)" if partial else "")
        print(f"\nGMA's best τ here by the last-10 mean{note}: {tau[0]:g} ({mean:.2f}; at client / server lr "
              f"{tau[1]:g} / {tau[2]:g}). The paper (label-skewed CIFAR-10, a plot without numbers) finds 0.4 best, "
              "lower τ underfitting and higher τ overfitting.")


def fig3d_best(rows: list[dict]) -> tuple | None:
    """The τ with the highest mean GMA last-10 accuracy, as (key, mean, seeds, taus left out), among the τ of its
    (lr, server lr, rounds) that have run the most seeds, compared on the seeds those share. A τ with fewer seeds
    (a sweep half done) is left out until it catches up: neither its own few seeds nor shrinking every other τ to
    them may decide the winner. A τ with a diverged run on one of the seeds (value None) is left out of the
    comparison. None when no τ has a value."""
    per = {}   # (tau, lr, server_lr, rounds) -> {seed: last-10}
    for r in rows:
        if r["varied"] == "tau" and r["aggregation"] == "GMA" and r["metric"] == "last10_global_acc":
            per.setdefault((r["value_varied"], r["lr"], r["server_lr"], r["rounds"]), {})[r["seed"]] = r["value"]
    best = None
    for setting in {k[1:] for k in per}:
        keys = [k for k in per if k[1:] == setting]
        most = max(len(per[k]) for k in keys)
        full = [k for k in keys if len(per[k]) == most]
        common = sorted(set.intersection(*(set(per[k]) for k in full)))
        for k in full:
            vals = [per[k][s] for s in common]
            if not vals or any(v is None for v in vals):
                continue
            mean = sum(vals) / len(vals)
            if best is None or mean > best[1]:
                best = (k, mean, common, sorted(t[0] for t in keys if t not in full))
    return best


def print_fig4(rows: list[dict], meta: dict) -> None:
    """Fig. 4 (scripts/gma_appendix.py): the share of coordinates whose sign agreement is below tau, per Dirichlet
    alpha and rounds trained, as mean ± sd over seeds (the paper draws it as a falling curve, without numbers)."""
    st = with_diverged(rows, ["alpha", "after_rounds"], "fraction_agreement_below_tau")
    print(*results.provenance_comments(meta), sep="\n")
    rounds = sorted({k[1] for k in st})
    print("| Dirichlet α | " + " | ".join(f"below τ after {t} rounds (%)" for t in rounds) + " | seeds |")
    print("|---|" + "---|" * len(rounds) + "---|")
    for alpha in sorted({k[0] for k in st}):
        cells = []
        for t in rounds:
            m, sd, n, note = cell(st, (alpha, t))
            cells.append(show(None if m is None else 100 * m, None if sd is None else 100 * sd, n, note))
        print(f"| {alpha:g} | " + " | ".join(cells) + f" | {max(cell(st, (alpha, t))[2] for t in rounds)} |")


# (key for --section, table, heading, printer), in the order they are printed
SECTIONS = (
    ("table10", "table10", "Table 10", print_table10),
    ("table10_selected", "table10", "Table 2's FedAvg row on FMNIST 2-class, 10 clients (Table 10's setting): AVG and "
     "GMA each at its grid pick from Table 10's runs, chosen on the clients' held-out splits", print_table10_selected),
    ("table10_momentum0", "table10_momentum0", "Table 10's grid at client momentum 0 (the paper's is 0.9): "
     "configs/03_table10_reduced.yaml or configs/03_table10.yaml with -p momentum 0", print_table10),
    ("table10_curves", "table10_curves", "Table 10's runs round by round: where each best comes from (the grid's "
     "test-accuracy curves, seed by seed)", print_table10_curves),
    ("table10_momentum0_selected", "table10_momentum0", "Table 2's FedAvg row on FMNIST 2-class, 10 clients, from "
     "the grid at client momentum 0 (the paper's is 0.9): each aggregation at its held-out pick among the cells run",
     print_table10_selected),
    ("table10_momentum0_curves", "table10_momentum0_curves", "The client-momentum-0 grid round by round",
     print_table10_curves),
    ("tables2_3", "tables2_3", "Tables 2-3", print_tables2_3),
    ("fedcmnist_shift", "tables2_3", "FedCMNIST in and out of distribution: the clients' held-out accuracy beside the "
     "test set's, and the fall from one to the other (Tables 2-3's FedCMNIST rows)", print_colour),
    ("server_rate", "server_rate", "Table 2's rows at server rates above 1 (scripts/gma_server_rate.py; best of the "
     "evaluated rounds)", print_tables2_3),
    ("mask_probe", "mask_probe", "GMA's mask, round by round (scripts/gma_mask_probe.py)", print_mask_probe),
    ("rate_probe", "rate_probe", "Table 10's setting on the whole data, FedAvg only: client rate x batch x input "
     "scaling (scripts/gma_rate_probe.py)", print_rate_probe),
    ("rate_probe_grid", "rate_probe", "The rate probe as a grid: best / final test accuracy after its rounds, per "
     "client rate", print_rate_probe_grid),
    ("quick_seeds", "quick_seeds", "Notebook 03's quick Table 10 grid over more seeds (scripts/gma_quick_seeds.py): "
     "best test accuracy over its 10 rounds", print_quick_seeds),
    ("participation", "participation", "Tables 4-5: one round with 5 or 2 of 10 FMNIST clients, AVG vs GMA from the "
     "same state (scripts/gma_appendix.py)", print_participation),
    ("convex", "convex", "Appendix E: logistic regression on MNIST, one full-batch step per client and round "
     "(scripts/gma_appendix.py)", print_convex),
    ("ablations", "ablations_full", "Tables 8, 9 and 6: clients, local epochs and client momentum on all of FMNIST, "
     "every client in every round (scripts/gma_ablations.py)", print_ablations_full),
    ("fig3d", "ablations_full", "Fig. 3d on FMNIST in place of CIFAR-10: GMA's threshold τ from 0 to 1, every client "
     "in every round (scripts/gma_ablations.py --tables tau)", print_fig3d),
    ("fig4", "fig4", "Fig. 4: sign agreement falls with heterogeneity, MNIST over 10 Dirichlet-skewed clients "
     "(scripts/gma_appendix.py)", print_fig4),
)


# ---- single values for the README's prose (`<!-- value: python scripts/gma_table.py --value NAME ... -->`) ------
def signed(x: float, digits: int = 2) -> str:
    """+0.15 / −0.67: the sign always shown, a typographic minus as the README's prose writes it."""
    return f"{x:+.{digits}f}".replace("-", "\u2212")


def table10_diffs(rows: list[dict], momentum: float = 0.9, rounds: int = 100, metric: str = "best_global_acc") -> dict:
    """{(server lr, client lr): {seed: GMA − AVG}} of the grid's cells where no run diverged."""
    runs: dict = {}
    for r in rows:
        if momentum_of(r) == momentum and r.get("rounds") == rounds and r["metric"] == metric:
            runs.setdefault((r["server_lr"], r["lr"]), {}).setdefault(r["seed"], {})[r["aggregation"]] = r["value"]
    return {k: {s: v["GMA"] - v["AVG"] for s, v in seeds.items()}
            for k, seeds in runs.items()
            if all(v.get("AVG") is not None and v.get("GMA") is not None for v in seeds.values())}


def value_small_steps(rows: list[dict]) -> str:
    """Where client × server rate is 1e-4 to 1e-3: the range of the cells' mean deficit and the seed runs behind."""
    cells = {k: d for k, d in table10_diffs(rows).items() if 1e-4 - 1e-12 <= k[0] * k[1] <= 1e-3 + 1e-12}
    means = [sum(d.values()) / len(d) for d in cells.values()]
    seeds = [x for d in cells.values() for x in d.values()]
    return (f"by {-max(means):.1f}-{-min(means):.1f} points, in {sum(x < 0 for x in seeds)} of {len(seeds)} seed runs"
            if means and max(means) < 0 else "GMA is not behind in every such cell: see the table")


def value_seeds(rows: list[dict]) -> str:
    """How many seeds the grid's cells that learn have, as "3-4" (or "4")."""
    n = sorted({len(d) for d in table10_diffs(rows).values()})
    return "0" if not n else f"{n[0]}" if n[0] == n[-1] else f"{n[0]}-{n[-1]}"


def value_diff(rows: list[dict], server_lr: str, lr: str, momentum: str = "0.9", metric: str = "best") -> str:
    """One cell's GMA − AVG, mean over its seeds, and how many: "+0.15, 4 seeds"."""
    d = table10_diffs(rows, float(momentum), metric=f"{metric}_global_acc").get((float(server_lr), float(lr)))
    if not d:
        raise SystemExit(f"--value diff {server_lr} {lr}: no such cell without a diverged run in table10")
    return f"{signed(sum(d.values()) / len(d))}, {len(d)} seed{'s' * (len(d) > 1)}"


def value_grid_range(rows: list[dict], momentum: str = "0", min_server_lr: str = "0",
                     max_server_lr: str = "inf") -> str:
    """GMA − AVG (best accuracy) over a 100-round grid's cells without a diverged run, at server rates from
    ``min_server_lr`` to ``max_server_lr``: "−2.50 to +1.28, 6 cells, 4 seeds each"."""
    cells = {k: d for k, d in table10_diffs(rows, float(momentum)).items()
             if float(min_server_lr) <= k[0] <= float(max_server_lr)}
    if not cells:
        raise SystemExit(f"--value grid-range {momentum}: no cell without a diverged run at client momentum {momentum}")
    means = [sum(d.values()) / len(d) for d in cells.values()]
    n = sorted({len(d) for d in cells.values()})
    seeds = f"{n[0]}" if n[0] == n[-1] else f"{n[0]}-{n[-1]}"
    return f"{signed(min(means))} to {signed(max(means))}, {len(cells)} cells, {seeds} seeds each"


def value_avg_gap(rows: list[dict], momentum: str = "0", min_server_lr: str = "0", max_server_lr: str = "inf") -> str:
    """How far our AVG (mean best accuracy) ends under the paper's AVG, over those cells: "2.4-5.6"."""
    runs: dict = {}
    for r in rows:
        if momentum_of(r) == float(momentum) and r.get("rounds") == 100 and r["metric"] == "best_global_acc" \
                and r["aggregation"] == "AVG" and float(min_server_lr) <= r["server_lr"] <= float(max_server_lr):
            runs.setdefault((r["server_lr"], r["lr"]), []).append(r["value"])
    gaps = [GMA_TABLE10["mean"][g][GMA_TABLE10_CLIENT_LRS.index(l)] - sum(v) / len(v)
            for (g, l), v in runs.items() if None not in v and g in GMA_TABLE10["mean"] and l in GMA_TABLE10_CLIENT_LRS]
    if not gaps:
        raise SystemExit(f"--value avg-gap {momentum}: no AVG cell without a diverged run at client momentum {momentum}")
    return f"{min(gaps):.1f}-{max(gaps):.1f}"


def value_fig3d_lead(rows: list[dict], tau: str) -> str:
    """Fig. 3d: GMA at ``tau`` minus GMA at τ = 0 (plain averaging, the same seed on the same device), seed by
    seed, over the seeds that ran both: "+2.15 ± 3.01, 4 seeds"."""
    lead = {k: d for k, d in fig3d_vs_tau0(rows).items() if k[0] == float(tau) and d["n"]}
    if len(lead) != 1:
        raise SystemExit(f"--value fig3d-lead {tau}: {len(lead)} tau sweeps with GMA at τ = {tau} and τ = 0 on a "
                         "common seed in ablations_full (need exactly 1)")
    d = next(iter(lead.values()))
    sd = "" if d["sd"] is None else f" ± {d['sd']:.2f}"
    return f"{signed(d['mean'])}{sd}, {d['n']} seed{'s' * (d['n'] > 1)}"


def value_selected(rows: list[dict], rule: str = "seed0", choice: str = "own", rounds: str = "100",
                   momentum: str = "0.9") -> str:
    """Table 2's FedAvg FMNIST 10-client row from a Table 10 grid at client ``momentum`` and ``rounds``: GMA − AVG of
    the best accuracy seed by seed at ``rule``'s picks (print_table10_selected), and the picks:
    "−0.58 ± 1.52, 4 seeds (AVG at 0.01 / 1, GMA at 0.01 / 1.5)"."""
    if rule not in SELECTION_RULES or choice not in ("own", "shared"):
        raise SystemExit(f"--value selected: RULE is {' or '.join(SELECTION_RULES)} and CHOICE own or shared; "
                         f"got {rule!r} {choice!r}")
    grid = [r for r in rows if momentum_of(r) == float(momentum) and r.get("rounds") == int(rounds)]
    picks = held_out_picks(grid, rule)
    if picks is None or picks[choice if choice == "shared" else "AVG"] is None:
        raise SystemExit(f"--value selected {rule} {choice} {rounds}: no cell to pick in the {rounds}-round grid at "
                         f"client momentum {momentum}")
    d = results.paired_difference(selected_rows(grid, picks, choice), [], "aggregation", "GMA", "AVG",
                                  "best_global_acc").get((), {})
    if not d or d["mean"] is None:
        raise SystemExit(f"--value selected {rule} {choice} {rounds}: no seed with both AVG and GMA at the picks")
    where = (f"AVG at {picks['AVG'][1]:g} / {picks['AVG'][0]:g}, GMA at {picks['GMA'][1]:g} / {picks['GMA'][0]:g}"
             if choice == "own" else f"both at {picks['shared'][1]:g} / {picks['shared'][0]:g}")
    sd = "" if d["sd"] is None else f" ± {d['sd']:.2f}"
    return f"{signed(d['mean'])}{sd}, {d['n']} seed{'s' * (d['n'] > 1)} ({where})"


def value_ablation(rows: list[dict], varied: str, value: str) -> str:
    """One Tables 8/9/6 row's GMA − AVG of the last-10 mean, seed by seed: "−3.34 ± 0.78, 2 seeds" (a base point
    that another table's runs supply counts, as in print_ablations_full)."""
    if varied not in ABLATION_BASE:
        raise SystemExit(f"--value ablation: varied {varied!r} is not one of {', '.join(ABLATION_BASE)}")
    by = ["varied", "value_varied", "lr", "server_lr", "rounds"]
    lead = last10_and_best([r for r in with_shared_runs(rows) if r["varied"] == varied
                            and r["value_varied"] == float(value)], by)[2]
    if len(lead) != 1 or next(iter(lead.values()))["mean"] is None:
        raise SystemExit(f"--value ablation {varied} {value}: {len(lead)} such rows with every run finished in "
                         "ablations_full (need exactly 1)")
    d = next(iter(lead.values()))
    return signed(d["mean"]) + ("" if d["sd"] is None else f" ± {d['sd']:.2f}") + f", {d['n']} seed{'s' * (d['n'] > 1)}"


def value_ablation_range(rows: list[dict], varied: str) -> str:
    """A Tables 8/9/6 sweep's GMA − AVG (last-10 mean, seed by seed) from its lowest to its highest value, and the
    seeds each value has: "−2.35 to +0.09; seeds 0-1 at N = 10, seed 0 at N = 50, 100 and 250"."""
    if varied not in ABLATION_BASE:
        raise SystemExit(f"--value ablation-range: varied {varied!r} is not one of {', '.join(ABLATION_BASE)}")
    mine = [r for r in with_shared_runs(rows) if r["varied"] == varied]
    lead = last10_and_best(mine, ["varied", "value_varied", "lr", "server_lr", "rounds"])[2]
    means = [d["mean"] for d in lead.values() if d["mean"] is not None]
    if not means:
        raise SystemExit(f"--value ablation-range {varied}: no finished rows in ablations_full")
    seeds: dict = {}
    for r in mine:
        seeds.setdefault(r["value_varied"], set()).add(r["seed"])
    by_set: dict = {}
    for v in sorted(seeds):
        by_set.setdefault(tuple(sorted(seeds[v])), []).append(f"{v:g}")
    name = {"clients": "N", "epochs": "E", "momentum": "momentum"}[varied]
    runs = lambda ss: (f"seed {ss[0]}" if len(ss) == 1 else f"seeds {ss[0]}-{ss[-1]}" if list(ss) == list(
        range(ss[0], ss[-1] + 1)) else "seeds " + ", ".join(map(str, ss)))
    words = lambda vs: vs[0] if len(vs) == 1 else ", ".join(vs[:-1]) + " and " + vs[-1]
    where = "; ".join(f"{runs(ss)} at {name} = {words(vs)}" for ss, vs in by_set.items())
    return f"{signed(min(means))} to {signed(max(means))}; {where}"


VALUES = {"small-steps": ("table10", value_small_steps), "seeds": ("table10", value_seeds),
          "diff": ("table10", value_diff), "diff-momentum0": ("table10_momentum0", value_diff),
          "grid-range-momentum0": ("table10_momentum0", value_grid_range),
          "avg-gap-momentum0": ("table10_momentum0", value_avg_gap),
          "fig3d-lead": ("ablations_full", value_fig3d_lead), "selected": ("table10", value_selected),
          "selected-momentum0": ("table10_momentum0", value_selected),
          "ablation": ("ablations_full", value_ablation), "ablation-range": ("ablations_full", value_ablation_range)}


def of_rounds(rows: list[dict], meta: dict, rounds: int) -> tuple[list[dict], dict] | None:
    """A table's runs of ``rounds`` rounds, with its commands narrowed to those whose settings ran that many
    (a command that recorded no round count stays); None if no row has that count."""
    rows = [r for r in rows if r.get("rounds") == rounds]
    meta = results.keep_parts(meta, lambda p: (p.get("settings") or {}).get(
        "grid_rounds", (p.get("settings") or {}).get("rounds", rounds)) == rounds)
    return (rows, meta) if rows else None


def main() -> None:
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--folder", default=str(results.RESULTS_DIR / "gma"))
    ap.add_argument("--section", choices=[key for key, *_ in SECTIONS],
                    help="print only this table, without its heading (what scripts/readme_results.py fills in)")
    ap.add_argument("--rounds", type=int, help="only the runs of this many rounds, and only the commands that "
                    "made them (Table 10 holds a CPU's 15-round grid beside the paper's 100)")
    ap.add_argument("--value", nargs="+", metavar=("NAME", "ARG"),
                    help=f"print one value for the README's prose instead of a table: {', '.join(VALUES)} "
                         "(diff SERVER_LR LR [MOMENTUM [best|last10]]; grid-range-momentum0 / avg-gap-momentum0 "
                         "[MOMENTUM [MIN_SERVER_LR [MAX_SERVER_LR]]]; ablation VARIED VALUE; ablation-range VARIED; "
                         "fig3d-lead TAU; selected / selected-momentum0 [RULE [CHOICE [ROUNDS [MOMENTUM]]]])")
    a = ap.parse_args()
    folder = Path(a.folder)
    if a.value:
        name, *args = a.value
        if name not in VALUES:
            raise SystemExit(f"--value: {name!r} is not one of {', '.join(VALUES)}")
        table, fn = VALUES[name]
        import inspect
        params = list(inspect.signature(fn).parameters.values())[1:]
        needed = [q for q in params if q.default is inspect.Parameter.empty]
        if not len(needed) <= len(args) <= len(params):
            usage = " ".join([q.name.upper() for q in needed] + [f"[{q.name.upper()}]" for q in params[len(needed):]])
            raise SystemExit(f"--value {name}: takes {usage or 'no arguments'}; got {args or 'none'}")
        got = results.read_table(folder, table)
        if got is None:
            raise SystemExit(f"--value {name}: no {folder}/{table}.csv yet")
        try:
            print(fn(got[0], *args))
        except ValueError as err:   # a rate or value that is not a number
            raise SystemExit(f"--value {name} {' '.join(args)}: {err}") from None
        return
    chosen = [s for s in SECTIONS if a.section in (None, s[0])]
    got = {name: results.read_table(folder, name) for _, name, _, _ in chosen}
    if a.rounds is not None:
        got = {name: t and of_rounds(*t, a.rounds) for name, t in got.items()}
    if a.section and not got[chosen[0][1]]:
        raise SystemExit(f"--section {a.section}: no {folder}/{chosen[0][1]}.csv yet")
    if not any(got.values()):
        raise SystemExit(f"no {folder}/table10.csv, tables2_3.csv, server_rate.csv, mask_probe.csv or rate_probe.csv yet: run "
                         "configs/03_table10.yaml (or _reduced on a CPU), configs/03_paper.yaml (or 03_table2_cpu.yaml "
                         "on a CPU), scripts/gma_server_rate.py, scripts/gma_mask_probe.py or scripts/gma_rate_probe.py")
    printed = False
    for _, name, heading, printer in chosen:
        if got[name]:
            if not a.section:
                print(("\n" if printed else "") + heading + "\n")
            printer(*got[name])
            printed = True

if __name__ == "__main__":
    main()
