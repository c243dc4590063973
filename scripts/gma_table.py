"""Print GMA's learning-rate grid (results/gma/table10.csv) as markdown, for the README.

    python scripts/gma_table.py

One row per (server rate, client rate): AVG and GMA as mean ± sample sd over seeds of the best test
accuracy over the rounds (and the last-10 mean), GMA − AVG, whether that is beyond the two spreads
added, and the paper's Table 10 values; a cell where any seed diverged says so instead of averaging the
rest. The first line says how the table was made and at what scale.
"""
from __future__ import annotations

from fltutor import results
from fltutor.paper_tables import GMA_TABLE10, GMA_TABLE10_CLIENT_LRS


def cell(stats: dict, key: tuple) -> tuple:
    s = stats.get(key, {"mean": None, "sd": None, "n": 0})
    return s["mean"], s["sd"], s["n"], s.get("diverged", "")


def show(m, sd, n, note="") -> str:
    return (note or "—") if m is None else f"{m:.2f}" + ("" if sd is None else f" ± {sd:.2f}")


def main() -> None:
    rows, meta = results.table_from_cli(__doc__.splitlines()[0], "gma", "table10",
                                        "run configs/03_table10.yaml (or _reduced on a CPU)")
    by = ["aggregation", "server_lr", "lr"]
    best, last = results.summarize(rows, by, "best_global_acc"), results.summarize(rows, by, "last10_global_acc")
    print(f"<!-- {meta.get('command')} | {meta.get('scale', '')} | {meta.get('device')} | {meta.get('date')} | "
          f"commit {str(meta.get('commit'))[:10]} | {meta.get('wall_s')} s -->")
    print("| server lr | client lr | AVG best | GMA best | GMA − AVG | beyond spread? | AVG last 10 | GMA last 10 "
          "| paper AVG / GMA |")
    print("|---|---|---|---|---|---|---|---|---|")
    runs = {}   # (aggregation, server_lr, lr) -> (runs, of which diverged): a cell with a diverged seed has no mean
    for r in rows:
        if r["metric"] == "best_global_acc":
            k = (r["aggregation"], r["server_lr"], r["lr"])
            runs[k] = (runs.get(k, (0, 0))[0] + 1, runs.get(k, (0, 0))[1])
    for r in rows:
        if r["metric"] == "diverged_round":
            k = (r["aggregation"], r["server_lr"], r["lr"])
            runs[k] = (runs[k][0], runs[k][1] + 1)
    for k, (n, bad) in runs.items():
        if bad:
            best[k] = last[k] = {"mean": None, "sd": None, "n": 0, "diverged": f"{bad} of {n} diverged"}
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


if __name__ == "__main__":
    main()
