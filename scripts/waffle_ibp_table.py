"""Print weight-factorization WAFFLe's Tables 1-2 (results/waffle_ibp/tables1_2.csv) as markdown, for the README.

    python scripts/waffle_ibp_table.py [--folder results/waffle_ibp] [--section table-2]

Table 2: mean local test accuracy, unimodal and multimodal; Table 1: the multimodal split's majority,
minority, gap and variance; WAFFLe's lead over FedAvg in both, seed by seed (with its smallest and
largest); once configs/02_heterogeneity.yaml has written heterogeneity.csv,
Fig. 7: WAFFLe's lead over FedAvg (unimodal) against Z, the classes per client (Z = 2 is Table 2's
column); and, once configs/02_open_choices.yaml has written open_choices.csv, the open choices mapped:
the minority's accuracy per KL weight x selection rate, one grid per step rule of the private selections;
and the ablations of ablations.csv (Tables 6-7: local epochs; Table 8: the L1 ablation; Table 9: alpha/F and
F, multimodal, and unimodal as the ICLR submission's Table 6) beside the paper's numbers. Each cell is the mean ± sample sd over seeds, the paper's value, and whether the difference is beyond the spread (|ours - paper| > our sd + the paper's sd where it gives one). A cell
where a seed diverged says so instead of averaging the rest. Rows are told apart by method, variant
(FedProx's mu, WAFFLe's selection rule) and the minority's classes; the paper's number is shown for
every row of its method, so two readings of an open choice can be held against it.
"""
from __future__ import annotations

import re
from pathlib import Path

import torch

from fltutor import results
from fltutor.ibp import prior_mean_pi
from fltutor.partition import MULTIMODAL_PRESETS
from fltutor.paper_tables import (WAFFLE_IBP_EPOCHS, WAFFLE_IBP_FIG7_GAP, WAFFLE_IBP_TABLE1, WAFFLE_IBP_TABLE2,
                                  WAFFLE_IBP_TABLE2_SPREAD, WAFFLE_IBP_TABLE8_L1, WAFFLE_IBP_TABLE9,
                                  WAFFLE_IBP_ALPHA_F_UNIMODAL)

BY = ["dataset", "method", "variant", "minority_classes"]


def _mean_sd(st: dict, sign: str = "") -> str:
    return "—" if st["mean"] is None else f"{st['mean']:{sign}.2f}" + ("" if st["sd"] is None else f" ± {st['sd']:.2f}")


def fmt(st: dict | None) -> str:
    if st is None:
        return "—"
    if st.get("missing"):
        return f"diverged in {st['missing']} of {st['missing'] + st['n']}"
    return _mean_sd(st)


def fmt_lead(st: dict) -> str:
    """A signed lead, mean ± sd over the seeds where both runs have a value, and how many seeds were lost."""
    return _mean_sd(st, "+") + (f" ({st['missing']} seed(s) lost)" if st.get("missing") else "")


def beyond(st: dict | None, paper, paper_sd) -> str:
    if st is None or paper is None or st["mean"] is None or st.get("missing"):
        return "—"
    if st["n"] < 2:
        return "n/a (1 seed)"
    return "yes" if abs(st["mean"] - paper) > (st["sd"] or 0) + (paper_sd or 0) else "no"


def label(k: dict) -> str:
    """The method, its variant, and the minority's classes where they are not the paper's preset."""
    preset = "-".join(str(c) for c in MULTIMODAL_PRESETS.get(k["dataset"], [((), 0)])[-1][0])
    minority = k["minority_classes"] if k["minority_classes"] not in ("", None, preset) else ""
    extra = [x for x in (k["variant"], minority and f"minority {minority}") if x]
    return k["method"] + (f" ({'; '.join(extra)})" if extra else "")


def slug(title: str) -> str:
    """'**Table 2** (local ...)' -> 'table-2': a bold caption's words, lower case, joined by '-'."""
    return "-".join(re.findall(r"[a-z0-9]+", title.split("**")[1].lower()))


def split_sections(text: str) -> dict[str, str]:
    """The printed tables one by one, keyed by their captions' slugs (a repeated caption gets -2, -3, ...). A
    section starts at the provenance comments right above its bold caption and ends where the next one starts."""
    lines = text.strip("\n").split("\n")
    starts = []
    for i, line in enumerate(lines):
        if line.startswith("**"):
            j = i
            while j > 0 and (lines[j - 1].startswith("<!--") or not lines[j - 1].strip()):
                j -= 1
            while j < i and not lines[j].strip():
                j += 1
            starts.append((j, slug(line)))
    if starts:
        starts[0] = (0, starts[0][1])   # the table's own provenance belongs to the first caption
    out: dict[str, str] = {}
    for n, (j, key) in enumerate(starts):
        end = starts[n + 1][0] if n + 1 < len(starts) else len(lines)
        k, c = key, 2
        while k in out:
            k, c = f"{key}-{c}", c + 1
        out[k] = "\n".join(lines[j:end]).strip("\n")
    return out


def main() -> None:
    import argparse
    import contextlib
    import io
    import sys
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--folder", default=str(results.RESULTS_DIR / "waffle_ibp"))
    ap.add_argument("--section", help="print only the table with this caption slug (e.g. table-2, fig-7; an unknown "
                    "one lists them): what scripts/readme_results.py fills in")
    ap.add_argument("--body", action="store_true", help="with --section: leave out the bold caption (for a README "
                    "paragraph that has its own)")
    a = ap.parse_args()
    m = re.fullmatch(r"epochs-(mnist|fashionmnist)-(unimodal|multimodal)", a.section or "")
    if m:   # Tables 6-7 for one dataset and mode, laid out as the README's Table 6 / Table 7
        got = results.read_table(Path(a.folder), "ablations")
        if got is None:
            sys.exit(f"--section {a.section}: no {a.folder}/ablations.csv yet: run configs/02_epochs.yaml")
        print("\n".join(epochs_table(*got, m[1], m[2])))
        return
    m = re.fullmatch(r"selections-(mnist|fashionmnist)", a.section or "")
    if m:   # the README's layout of the selection probe (epochs_probe.csv) beside Tables 6-7's leads
        probe, ab = results.read_table(Path(a.folder), "epochs_probe"), results.read_table(Path(a.folder), "ablations")
        if probe is None or ab is None:
            sys.exit(f"--section {a.section}: needs {a.folder}/epochs_probe.csv and ablations.csv: run "
                     "configs/02_epochs.yaml, then scripts/waffle_ibp_epochs_probe.py")
        print("\n".join(selections_table(*probe, ab[0], m[1])))
        return
    if a.section is None:
        return print_all(a.folder)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        print_all(a.folder)
    parts = split_sections(buf.getvalue())
    if a.section not in parts:
        sys.exit(f"--section {a.section!r}: choose one of {', '.join(parts)}, epochs-DATASET-MODE (Tables 6-7: "
                 "DATASET mnist or fashionmnist, MODE unimodal or multimodal) or selections-DATASET (the selection "
                 "probe as E grows)")
    text = parts[a.section]
    if a.body:   # the caption is the section's first line that is not a provenance comment
        lines = text.split("\n")
        at = next(i for i, line in enumerate(lines) if line.startswith("**"))
        text = "\n".join(lines[:at] + lines[at + 1:]).replace("-->\n\n", "-->\n").strip("\n")
    print(text)


def print_all(folder) -> None:
    folder = Path(folder)
    got = results.read_table(folder, "tables1_2")
    if got is None:
        raise SystemExit(f"no {folder}/tables1_2.csv yet: run configs/02_mnist_cpu.yaml or configs/02_paper.yaml")
    rows, meta = got
    rows = [{k: ("" if v is None and k in BY else v) for k, v in r.items()} for r in rows]   # CSV reads "" as None
    other_t = sorted({r["rounds"] for r in rows if r.get("rounds") not in (None, 100)})
    if other_t:   # Tables 1-2 are T = 100; a run at another T is another experiment, never pooled into a cell
        print(f"<!-- left out: rows with T = {other_t} rounds (Tables 1-2 use T = 100) -->")
        rows = [r for r in rows if r.get("rounds") in (None, 100)]
    print(*results.provenance_comments(meta), sep="\n")
    uni = results.summarize([r for r in rows if r["mode"] == "unimodal"], BY, "local_acc")
    multi = {m: results.summarize([r for r in rows if r["mode"] == "multimodal"], BY, m)
             for m in ("local_acc", "majority", "minority", "gap", "variance")}
    bases = sorted({(r["dataset"], r["method"], r["variant"]) for r in rows}, key=str)
    print("\n**Table 2** (local test accuracy, %): ours (mean ± sd over seeds), the paper's, beyond the spread?\n")
    print("| dataset | method | seeds | unimodal | paper | beyond? | multimodal | paper | beyond? |")
    print("|---|---|---|---|---|---|---|---|---|")
    for base in bases:
        u = uni.get((*base, ""))
        minorities = sorted({k[3] for k in multi["local_acc"] if k[:3] == base}) or [""]
        p = WAFFLE_IBP_TABLE2.get(base[0], {}).get(base[1])
        psd = WAFFLE_IBP_TABLE2_SPREAD.get(base[0], {}).get(base[1])
        for minority in minorities:   # one row per reading of the minority (the unimodal split has none)
            mu = multi["local_acc"].get((*base, minority))
            k = dict(zip(BY, (*base, minority)))
            seeds = "/".join(str((s or {}).get("n", 0) + (s or {}).get("missing", 0)) for s in (u, mu))
            print(f"| {base[0]} | {label(k)} | {seeds} | {fmt(u)} | {p[0] if p else '—'} | "
                  f"{beyond(u, p and p[0], psd and psd[0])} | {fmt(mu)} | {p[1] if p else '—'} | "
                  f"{beyond(mu, p and p[1], psd and psd[1])} |")
    print("\n**Table 1** (multimodal; accuracy in %, variance in %²): ours, then the paper's\n")
    print("| dataset | method | seeds | majority | minority | minority beyond? | gap | variance |")
    print("|---|---|---|---|---|---|---|---|")
    for key in sorted(multi["minority"], key=str):
        k = dict(zip(BY, key))
        pap = {m: WAFFLE_IBP_TABLE1[m].get(k["dataset"], {}).get(k["method"]) for m in ("majority", "minority", "gap", "variance")}
        st = {m: multi[m].get(key) for m in pap}
        n = (st["minority"] or {}).get("n", 0) + (st["minority"] or {}).get("missing", 0)
        cells = [f"{fmt(st[m])} / {pap[m] if pap[m] is not None else '—'}" for m in ("majority", "minority")]
        print(f"| {k['dataset']} | {label(k)} | {n} | {cells[0]} | {cells[1]} | {beyond(st['minority'], pap['minority'], None)} | "
              f"{fmt(st['gap'])} / {pap['gap'] if pap['gap'] is not None else '—'} | "
              f"{fmt(st['variance'])} / {pap['variance'] if pap['variance'] is not None else '—'} |")

    print_table12_leads(rows)

    got = results.read_table(folder, "heterogeneity")
    if got is not None:
        print_by_z(rows, *got)
    got = results.read_table(folder, "open_choices")
    if got is not None:
        print_open_choices(*got, fedavg=fedavg_minority(rows, "mnist"))
    got = results.read_table(folder, "ablations")
    if got is not None:
        print_table8_like_for_like(rows, meta, *got)
        print_ablations(*got)
        print_epochs_leads(got[0])
        print_alpha_f(got[0])
        print_alpha_f_factors(got[0])
    got = results.read_table(folder, "epochs_probe")
    if got is not None:
        print_epochs_probe(*got, ablation_rows=(results.read_table(folder, "ablations") or ([], {}))[0])


LEAD_METRICS = ("local_acc", "majority", "minority", "gap")


def table12_leads(rows: list[dict]) -> dict[tuple, dict]:
    """Tables 1-2: each WAFFLe variant's lead over FedAvg, seed by seed, per (dataset, mode, minority's classes,
    lr, variant), on the local accuracy and, for the multimodal split, majority, minority and gap; only seeds
    where both ran count, and only at the same shared lr (a WAFFLe run at another rate is not FedAvg's pair).
    {key: {metric: paired summary (with min and max), "paper": {metric: the paper's lead or None}}}"""
    by = ["dataset", "mode", "minority_classes", "lr"]
    rows = [{"lr": None, **r} for r in rows]   # a table written before the lr column pairs at one rate
    fedavg = [r for r in rows if r["method"] == "fedavg" and not r["variant"]]
    out = {}
    for v in sorted({r["variant"] for r in rows if r["method"] == "waffle_ibp"}):
        waffle = [r for r in rows if r["method"] == "waffle_ibp" and r["variant"] == v]
        ran = {(*(r[k] for k in by), r["seed"]) for r in waffle}   # FedAvg's other seeds are not this variant's pairs
        pairs = [r for r in fedavg if (*(r[k] for k in by), r["seed"]) in ran]
        paired = {tuple(r[k] for k in by) for r in pairs}   # a variant with no FedAvg run beside it has no lead
        for m in LEAD_METRICS:
            for key, st in results.paired_difference(waffle + pairs, by, "method", "waffle_ibp", "fedavg", m).items():
                if key in paired:
                    out.setdefault((*key, v), {})[m] = st
    for (ds, mode, *_), cell in out.items():
        t2 = WAFFLE_IBP_TABLE2.get(ds, {})
        paper = {"local_acc": t2["waffle_ibp"][mode == "multimodal"] - t2["fedavg"][mode == "multimodal"] if t2 else None}
        for m in ("majority", "minority", "gap"):
            t1 = WAFFLE_IBP_TABLE1[m].get(ds, {})
            paper[m] = t1["waffle_ibp"] - t1["fedavg"] if t1 and mode == "multimodal" else None
        cell["paper"] = paper
    return dict(sorted(out.items(), key=str))


def print_table12_leads(rows: list[dict]) -> None:
    leads = table12_leads(rows)
    if not leads:
        return
    print("\n**WAFFLe's lead over FedAvg** (Tables 1-2; points, seed by seed at the same seeds and lr: mean ± sd "
          "[smallest, largest] / the paper's lead)\n")
    print("| dataset | mode | minority | lr | WAFFLe | seeds | local acc | majority | minority | gap |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (ds, mode, minority, lr, v), cell in leads.items():
        n = max(st["n"] for m, st in cell.items() if m != "paper")
        texts = []
        for m in LEAD_METRICS:
            st, paper = cell.get(m), cell["paper"][m]
            if st is None:
                texts.append("—")
                continue
            span = "" if st["n"] < 2 else f" [{st['min']:+.2f}, {st['max']:+.2f}]"
            texts.append(fmt_lead(st) + span + ("" if paper is None else f" / {paper:+.2f}"))
        print(f"| {ds} | {mode} | {minority or '—'} | {'—' if lr is None else f'{lr:g}'} | {v} | {n} | "
              + " | ".join(texts) + " |")


DEFAULT_KL = 0.1   # notebook 02's KL weight; a WAFFLe row whose variant names no KL weight ran at it


def _kl_of(r: dict) -> float | None:
    """The KL weight of a weight-factorization WAFFLe row, read from its variant ("adam 0.1, KL 0.1, ..."); None
    for other methods."""
    if not str(r.get("method", "")).startswith("waffle_ibp"):
        return None
    m = re.search(r"KL ([0-9.eE+-]+)", str(r.get("variant") or ""))
    return float(m.group(1)) if m else DEFAULT_KL


def ablation_cells(rows: list[dict]) -> dict[tuple, dict]:
    """Local accuracy over seeds per ablation cell, keyed (table, dataset, mode, method, step rule, setting):
    the setting is the L1 weight (Table 8), (alpha/F, F) (Table 9) or (E, lr) (Tables 6-7: the paper's multimodal
    runs used lr 0.02, so a run at another rate is kept apart and shown without the paper's number), with WAFFLe's
    KL weight as a third entry where it is not DEFAULT_KL."""
    keyed = []
    for r in rows:
        if r["metric"] != "local_acc":
            continue
        kl = _kl_of(r)
        setting = (float(r["l1_weight"]) if r["table"] == "Table 8" else
                   (float(r["alpha_ratio"]), int(r["num_factors"])) if r["table"] == "Table 9" else
                   (int(r["local_epochs"]), float(r["lr"])) + (() if kl in (None, DEFAULT_KL) else (kl,)))
        keyed.append({"key": (r["table"], r["dataset"], r["mode"], r["method"], r["selection_optimizer"] or "", setting),
                      "seed": r["seed"], "metric": "local_acc", "value": r["value"]})
    return {k[0]: v for k, v in results.summarize(keyed, ["key"], "local_acc").items()}


def ablation_paper(table: str, ds: str, mode: str, method: str, setting):
    """The paper's number for one ablation cell (ablation_cells' key), or None where it prints none."""
    if table == "Table 8":
        return WAFFLE_IBP_TABLE8_L1.get(setting)
    if table == "Table 9":   # multimodal: Table 9; unimodal: only the ICLR submission's Table 6 has it
        grid_ = WAFFLE_IBP_TABLE9 if mode == "multimodal" else WAFFLE_IBP_ALPHA_F_UNIMODAL
        return grid_.get(setting) if ds == "mnist" else None
    epochs, lr = setting[:2]
    if mode == "multimodal" and lr != 0.02:   # Table 7 was run at 0.02 (section IV-G-2)
        return None
    return WAFFLE_IBP_EPOCHS.get(mode, {}).get(ds, {}).get(method, {}).get(epochs)


def setting_label(table: str, setting) -> str:
    return (f"L1 weight {setting:g}" if table == "Table 8" else
            f"alpha/F {setting[0]:g}, F {setting[1]}" if table == "Table 9" else
            f"E = {setting[0]}, lr {setting[1]:g}" + (f", KL {setting[2]:g}" if len(setting) > 2 else ""))


def print_ablations(rows: list[dict], meta: dict) -> None:
    print(*results.provenance_comments(meta), sep="\n")
    print("\n**Ablations** (local test accuracy, %): ours (mean ± sd over seeds, seeds in brackets) / the paper's; "
          "beyond? when |ours − paper| exceeds our sd (the paper gives these without a spread)\n")
    print("| table | dataset | mode | method | selections stepped by | setting | ours | paper | beyond? |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (table, ds, mode, method, opt, setting), st in sorted(ablation_cells(rows).items(), key=lambda kv: kv[0]):
        paper, what = ablation_paper(table, ds, mode, method, setting), setting_label(table, setting)
        n = st["n"] + st.get("missing", 0)
        print(f"| {table} | {ds} | {mode} | {method} | {opt or '—'} | {what} | {fmt(st)} ({n}) | "
              f"{'—' if paper is None else f'{paper:.2f}'} | {beyond(st, paper, None)} |")


def table8_like_for_like(table12_rows: list[dict], ablation_rows: list[dict]) -> dict[tuple, dict]:
    """Table 8 like for like (MNIST unimodal, T = 100): WAFFLe (IBP) against its L1 ablation where the private
    parameters of both were stepped by the same rule, read from the rows' shared variant ("adam 0.1, KL 0.1, ..."
    or "sgd shared lr, KL 1, ..."; the L1 ablation ignores the KL weight). Keyed (variant, lr, L1 weight):
    {"ibp": summary, "l1": summary, "lead": L1 minus IBP seed by seed (paired_difference), "ahead": seeds where
    L1 is ahead}."""
    def mine(r: dict, method: str) -> bool:
        return ((r["dataset"], r["mode"], r["method"], r["metric"]) == ("mnist", "unimodal", method, "local_acc")
                and r.get("rounds") in (None, 100))
    l1 = [r for r in ablation_rows if r["table"] == "Table 8" and mine(r, "waffle_ibp_l1")]
    out = {}
    for key in sorted({(r["variant"], r["lr"], float(r["l1_weight"])) for r in l1}, key=str):
        a = [r for r in l1 if (r["variant"], r["lr"], float(r["l1_weight"])) == key]
        b = [r for r in table12_rows if mine(r, "waffle_ibp") and (r["variant"], r["lr"]) == key[:2]]
        if not b:   # an ablation with no IBP run under its rule has nothing to be held against
            continue
        lead = results.paired_difference(a + b, ["variant"], "method", "waffle_ibp_l1", "waffle_ibp", "local_acc")
        vals = {m: {r["seed"]: r["value"] for r in rows} for m, rows in (("l1", a), ("ibp", b))}
        ahead = sum(1 for s, v in vals["l1"].items()
                    if v is not None and vals["ibp"].get(s) is not None and v > vals["ibp"][s])
        out[key] = {"ibp": results.summarize(b, ["variant"], "local_acc")[(key[0],)],
                    "l1": results.summarize(a, ["variant"], "local_acc")[(key[0],)],
                    "lead": lead[(key[0],)], "ahead": ahead}
    return out


def step_rule_words(variant: str, lr) -> str:
    """'adam 0.1, KL 0.1, ...' -> 'Adam at 0.1 (IBP: KL weight 0.1)'; 'sgd shared lr, KL 1, ...' -> SGD at the
    shared rate, as Algorithm 2 is written. Anything else is shown as it is."""
    m = re.match(r"(adam|sgd) ([^,]+), KL ([0-9.eE+-]+)", variant or "")
    if not m:
        return variant or "—"
    rule, rate, kl = m.groups()
    if rule == "sgd":
        at = f"the shared {float(lr):g}" if rate == "shared lr" and lr is not None else rate
        return f"SGD at {at}, as Algorithm 2 is written (IBP: KL weight {kl})"
    return f"Adam at {rate} (IBP: KL weight {kl})"


def print_table8_like_for_like(table12_rows: list[dict], t12_meta: dict, ablation_rows: list[dict],
                               ab_meta: dict) -> None:
    cells = table8_like_for_like(table12_rows, ablation_rows)
    if not cells:
        return
    variants = {k[0] for k in cells}

    def ran_ibp(p: dict) -> bool:   # a command that ran WAFFLe on MNIST unimodal (Tables 1-2's file)
        st = p.get("settings") or {}
        return "mnist" in (st.get("datasets") or []) and "unimodal" in (st.get("modes") or []) and \
            "waffle_ibp" in (st.get("methods") or [])
    # in ablations.csv only configs/02_mnist_cpu.yaml's l1_weights write Table 8 (02_epochs and 02_ablations
    # write Tables 6, 7 and 9); a command that wrote both files is named once
    lines = results.provenance_comments(results.keep_parts(t12_meta, ran_ibp)) + results.provenance_comments(
        results.keep_parts(ab_meta, lambda p: "02_mnist_cpu" in str(p.get("command"))))
    print(*dict.fromkeys(lines), sep="\n")
    ibp_paper = WAFFLE_IBP_TABLE2["mnist"]["waffle_ibp"][0]
    print(f"\n**Table 8, like for like** (MNIST unimodal, T = 100; local test accuracy, %: mean ± sd over seeds; "
          f"the L1 ablation's scores and the IBP's selections stepped by the same rule; {len(variants)} rules)\n")
    print("| step rule of the private parameters | L1 weight | seeds | WAFFLe (IBP) | L1 ablation | "
          "L1 − IBP, seed by seed | L1 ahead in | paper: IBP / L1 |")
    print("|---|---|---|---|---|---|---|---|")
    for (variant, lr, w), c in cells.items():
        paper_l1 = WAFFLE_IBP_TABLE8_L1.get(w)
        n = c["lead"]["n"]
        print(f"| {step_rule_words(variant, lr)} | {w:g} | {n} | {fmt(c['ibp'])} | {fmt(c['l1'])} | "
              f"{fmt_lead(c['lead'])} [{c['lead']['min']:+.2f}, {c['lead']['max']:+.2f}] | {c['ahead']} of {n} | "
              f"{ibp_paper} / {'—' if paper_l1 is None else paper_l1} |")


def epochs_kls(rows: list[dict]) -> list[float]:
    """The KL weights WAFFLe ran at in Tables 6-7's rows, notebook 02's default first."""
    kls = {_kl_of(r) for r in rows if r["table"] == "Tables 6-7"} - {None}
    return sorted(kls, key=lambda k: (k != DEFAULT_KL, k))


def epochs_leads(rows: list[dict], kl: float = DEFAULT_KL) -> dict[tuple, dict]:
    """Tables 6-7: WAFFLe's lead over FedAvg per (dataset, mode, lr, E), seed by seed, on the local accuracy and,
    where the split has one, the minority; with the paper's lead where it prints one (Table 7: lr 0.02 only).
    Only WAFFLe's runs at KL weight ``kl`` count, against FedAvg's runs of the same seeds.
    {key: {"local_acc": summary, "minority": summary or None, "paper": float or None}}"""
    by = ["dataset", "mode", "lr", "local_epochs"]
    t = [{**r, "local_epochs": int(r["local_epochs"]), "lr": float(r["lr"])} for r in rows if r["table"] == "Tables 6-7"
         and _kl_of(r) in (None, kl)]
    mine = {(*(r[k] for k in by), r["seed"]) for r in t if _kl_of(r) == kl}
    t = [r for r in t if _kl_of(r) is not None or (*(r[k] for k in by), r["seed"]) in mine]
    out = {}
    for m in ("local_acc", "minority"):
        for key, st in results.paired_difference(t, by, "method", "waffle_ibp", "fedavg", m).items():
            out.setdefault(key, {"local_acc": None, "minority": None})[m] = st
    # each method's local minus global accuracy, seed by seed: how much a client's own test data gains over
    # the global test set (for WAFFLe: what the private selections add to the shared dictionary)
    lift_rows = []
    for r in t:
        if r["metric"] in ("local_acc", "global_acc"):
            lift_rows.append({**r, "which": r["metric"], "metric": "acc"})
    for m in ("waffle_ibp", "fedavg"):
        got = results.paired_difference([r for r in lift_rows if r["method"] == m], by, "which", "local_acc",
                                        "global_acc", "acc")
        for key, st in got.items():
            if key in out and st["n"]:   # a run without global accuracy rows has no lift to show
                out[key][f"lift_{m}"] = st
    for (ds, mode, lr, e), cell in out.items():
        p = [ablation_paper("Tables 6-7", ds, mode, m, (e, lr)) for m in ("waffle_ibp", "fedavg")]
        cell["paper"] = None if None in p else round(p[0] - p[1], 2)
    return dict(sorted(out.items()))


def print_epochs_leads(rows: list[dict]) -> None:
    got = {kl: epochs_leads(rows, kl) for kl in epochs_kls(rows)}
    if not any(got.values()):
        return
    print("\n**Tables 6-7: WAFFLe's lead over FedAvg** (points, seed by seed: mean ± sd over the seeds both ran)\n")
    print("| dataset | mode | lr | WAFFLe's KL weight | E | seeds | lead, local acc | paper | lead, minority | "
          "WAFFLe local − global | FedAvg local − global |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for kl, cells in got.items():
        for (ds, mode, lr, e), c in cells.items():
            paper = "—" if c["paper"] is None else f"{c['paper']:+.2f}"
            leads = [fmt_lead(c[m]) if c.get(m) else "—" for m in ("local_acc", "minority", "lift_waffle_ibp", "lift_fedavg")]
            print(f"| {ds} | {mode} | {lr:g} | {kl:g} | {e} | {c['local_acc']['n']} | {leads[0]} | {paper} | {leads[1]} | "
                  f"{leads[2]} | {leads[3]} |")
    print("\nlocal − global: a run's accuracy on its clients' own test data minus its global model's on the global "
          "test set, seed by seed (WAFFLe's global model takes the IBP prior's mean selection)")


def epochs_table(rows: list[dict], meta: dict, dataset: str, mode: str) -> list[str]:
    """Table 6 (unimodal) or Table 7 (multimodal) for one dataset as the README lays it out: a row per local
    epoch count E (and rate, where several ran) at notebook 02's KL weight, FedAvg and WAFFLe beside the paper's,
    WAFFLe's lead seed by seed beside the paper's lead, then (unimodal) what the private selections add, local
    minus global accuracy, or (multimodal) the lead on the minority and WAFFLe's minority. With the provenance of
    the 02_epochs commands that ran this dataset and mode."""
    cells = {k: st for k, st in ablation_cells(rows).items()
             if k[0] == "Tables 6-7" and k[1] == dataset and k[2] == mode and len(k[5]) == 2}
    leads = epochs_leads(rows)
    minority = results.summarize([{**r, "local_epochs": int(r["local_epochs"]), "lr": float(r["lr"])} for r in rows
                                  if r["table"] == "Tables 6-7" and r["method"] == "waffle_ibp" and _kl_of(r) == DEFAULT_KL
                                  and r["dataset"] == dataset and r["mode"] == mode],
                                 ["local_epochs", "lr"], "minority")
    settings = sorted({k[5] for k in cells})
    several_lrs = len({lr for _, lr in settings}) > 1

    def cell(method: str, setting) -> str:
        st = next((v for k, v in cells.items() if k[3] == method and k[5] == setting), None)
        paper = ablation_paper("Tables 6-7", dataset, mode, method, setting)
        return f"{fmt(st)} / {'—' if paper is None else f'{paper:.2f}'}"

    out = results.provenance_comments(results.keep_parts(meta, lambda p: "02_epochs" in str(p.get("command"))
                                                         and dataset in ((p.get("settings") or {}).get("datasets") or [dataset])
                                                         and mode in ((p.get("settings") or {}).get("modes") or [mode])))
    tail = (["WAFFLe local − global", "FedAvg local − global"] if mode == "unimodal" else
            ["lead on the minority", "WAFFLe minority"])
    out += [f"| E | FedAvg / paper | WAFFLe / paper | WAFFLe's lead / paper's | {' | '.join(tail)} |",
            "|---|---|---|---|---|---|"]
    for e, lr in settings:
        c = leads.get((dataset, mode, lr, e), {})
        lead = (fmt_lead(c["local_acc"]) if c.get("local_acc") else "—") + \
            f" / {'—' if c.get('paper') is None else format(c['paper'], '+.2f')}"
        ends = ([fmt_lead(c[m]) if c.get(m) else "—" for m in ("lift_waffle_ibp", "lift_fedavg")] if mode == "unimodal"
                else [fmt_lead(c["minority"]) if c.get("minority") else "—", fmt(minority.get((e, lr)))])
        name = f"{e}, lr {lr:g}" if several_lrs else f"{e}"
        out.append(f"| {name} | {cell('fedavg', (e, lr))} | {cell('waffle_ibp', (e, lr))} | {lead} | {' | '.join(ends)} |")
    return out


PROBE_PAIRS = {"own − prior mean": ("own", "prior_mean"), "own − disjoint's": ("own", "swap_disjoint"),
               "own − same classes'": ("own_same", "swap_same")}


def epochs_probe(rows: list[dict], layer: str = "fc1") -> dict[tuple, dict]:
    """Tables 6-7's private selections (epochs_probe.csv, ``scripts/waffle_ibp_epochs_probe.py``) per (dataset,
    mode, lr, E, group): each score difference of PROBE_PAIRS seed by seed, the Jaccard overlap of the active
    factor sets per class relation and the active count, each a summary over seeds."""
    t = _probe_rows(rows)
    by = ["dataset", "mode", "lr", "kl_weight", "local_epochs", "group"]
    scores = [{**r, "which": r["metric"], "metric": "acc"} for r in t
              if not r["metric"].startswith(("jaccard", "pairs", "active", "prior_distance"))]
    out: dict[tuple, dict] = {}
    for name, (a, b) in PROBE_PAIRS.items():
        for key, st in results.paired_difference(scores, by, "which", a, b, "acc").items():
            if st["n"]:
                out.setdefault(key, {})[name] = st
    for m in ("jaccard_same", "jaccard_none", "active", "prior_distance"):
        for key, st in results.summarize(t, by, f"{m}_{layer}").items():
            out.setdefault(key, {})[m] = st
    overlap = [{**r, "which": r["metric"], "metric": "jaccard"} for r in t if r["metric"].startswith("jaccard")]
    for key, st in results.paired_difference(overlap, by, "which", f"jaccard_same_{layer}", f"jaccard_none_{layer}",
                                             "jaccard").items():
        out.setdefault(key, {})["jaccard same − none"] = st
    return dict(sorted(out.items(), key=lambda kv: (*kv[0][:5], kv[0][5] != "all", kv[0][5])))


def _probe_rows(rows: list[dict]) -> list[dict]:
    """epochs_probe.csv's rows with numbers typed; a row from before the KL weight was recorded is notebook 02's 0.1."""
    return [{**r, "local_epochs": int(r["local_epochs"]), "lr": float(r["lr"]),
             "kl_weight": DEFAULT_KL if r.get("kl_weight") is None else float(r["kl_weight"])} for r in rows]


def versus_fedavg(probe_rows: list[dict], ablation_rows: list[dict], score: str = "prior_mean") -> dict[tuple, dict]:
    """A probe score of WAFFLe on the clients' own test data (``score``: "prior_mean", every client at the IBP prior
    mean, i.e. WAFFLe without its selections; "own", its local accuracy) minus FedAvg's local accuracy in Tables
    6-7's runs, seed by seed over the seeds the probe has, per (dataset, mode, lr, KL weight, E)."""
    by = ["dataset", "mode", "lr", "local_epochs"]
    fedavg = [{**r, "local_epochs": int(r["local_epochs"]), "lr": float(r["lr"]), "which": "fedavg", "metric": score}
              for r in ablation_rows if r.get("table") == "Tables 6-7" and r["method"] == "fedavg" and r["metric"] == "local_acc"]
    probe = [{**r, "which": "waffle"} for r in _probe_rows(probe_rows) if r["metric"] == score and r["group"] == "all"]
    out = {}
    for kl in sorted({r["kl_weight"] for r in probe}):   # FedAvg has no KL: each WAFFLe setting is paired with it
        mine = [r for r in probe if r["kl_weight"] == kl]
        seeds = {(*(r[k] for k in by), r["seed"]) for r in mine}   # FedAvg's other seeds were not probed at this KL
        got = results.paired_difference(mine + [r for r in fedavg if (*(r[k] for k in by), r["seed"]) in seeds], by,
                                        "which", "waffle", "fedavg", score)
        out.update({(*k[:3], kl, k[3]): st for k, st in got.items() if st["n"]})
    return dict(sorted(out.items()))


def print_epochs_probe(rows: list[dict], meta: dict, ablation_rows: list[dict] | None = None) -> None:
    got = epochs_probe(rows)
    if not got:
        return
    print(*results.provenance_comments(meta), sep="\n")
    print("\n**Tables 6-7: what the private selections still carry** (WAFFLe, each client scored on its own test "
          "data; points, seed by seed, mean ± sd over seeds)\n")
    print("| dataset | mode | lr | KL weight | E | group | " + " | ".join(PROBE_PAIRS) + " | Jaccard, same classes | "
          "Jaccard, disjoint | same − disjoint | active factors | distance from the prior |")
    print("|---|---|---|---|---|---|" + "---|" * (len(PROBE_PAIRS) + 5))
    for (ds, mode, lr, kl, e, group), c in got.items():
        diffs = [fmt_lead(c[n]) if c.get(n) else "—" for n in PROBE_PAIRS]
        jac = [f"{c[m]['mean']:.3f}" if c.get(m) and c[m]["mean"] is not None else "—"
               for m in ("jaccard_same", "jaccard_none")]
        d = c.get("jaccard same − none")
        gap = "—" if not d or d["mean"] is None else f"{d['mean']:+.3f}" + (f" ± {d['sd']:.3f}" if d["sd"] else "")
        act = fmt(c.get("active"))
        dist = "—" if not c.get("prior_distance") or c["prior_distance"]["mean"] is None else f"{c['prior_distance']['mean']:.3f}"
        print(f"| {ds} | {mode} | {lr:g} | {kl:g} | {e} | {group} | {' | '.join(diffs)} | {jac[0]} | {jac[1]} | {gap} | "
              f"{act} | {dist} |")
    print("\nown − disjoint's: each client scored with the selection of a random client holding none of its classes; "
          "own − same classes': with that of one holding the same two (clients that have one); Jaccard: overlap of "
          "the factor sets with q(b) > 0.5 (fc1), over pairs of clients")
    for score, what in (("own", "WAFFLe's lead (own selections)"), ("prior_mean", "WAFFLe without its selections "
                                                                          "(every client at the prior mean)")):
        base = versus_fedavg(rows, ablation_rows or [], score)
        if base:
            print(f"\n{what} minus FedAvg, both on the clients' own test data, seed by seed: " + "; ".join(
                f"{ds} {mode} KL {kl:g} E={e}: {fmt_lead(st)} (n={st['n']})" for (ds, mode, lr, kl, e), st in base.items()))


def selections_table(probe_rows: list[dict], probe_meta: dict, ablation_rows: list[dict], dataset: str) -> list[str]:
    """The README's table of what WAFFLe's private selections carry as E grows, for one dataset: a row per (mode,
    KL weight, E) with WAFFLe's lead over FedAvg (Tables 6-7's runs, seed by seed; on the multimodal split the
    minority's lead), the probe's score differences (the minority's on the multimodal split), the factor-set
    overlap and distance from the prior over all clients, and WAFFLe at the prior mean minus FedAvg."""
    probe = {k: c for k, c in epochs_probe(probe_rows).items() if k[0] == dataset}
    base = {k: st for k, st in versus_fedavg(probe_rows, ablation_rows, "prior_mean").items() if k[0] == dataset}
    leads = {kl: epochs_leads(ablation_rows, kl) for kl in epochs_kls(ablation_rows)}
    keys = sorted({k[1:5] for k in probe if k[5] == "all"},
                  key=lambda k: (k[0] != "unimodal", k[2] != DEFAULT_KL, k[2], k[3]))   # (mode, lr, kl, E)
    several_lrs = len({(mode, lr) for mode, lr, *_ in keys}) > len({k[0] for k in keys})
    out = results.provenance_comments(probe_meta) + [
        "| mode | KL weight | E | seeds | lead over FedAvg | " + " | ".join(PROBE_PAIRS) +
        " | factor-set overlap (Jaccard), same classes / disjoint | distance from the prior | "
        "WAFFLe at the prior mean − FedAvg |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for mode, lr, kl, e in keys:
        group = "minority" if mode == "multimodal" else "all"
        scores, every = probe.get((dataset, mode, lr, kl, e, group), {}), probe[dataset, mode, lr, kl, e, "all"]
        lead = leads.get(kl, {}).get((dataset, mode, lr, e), {}).get("local_acc" if group == "all" else "minority")
        jac = " / ".join(f"{every[m]['mean']:.3f}" if every.get(m) and every[m]["mean"] is not None else "—"
                         for m in ("jaccard_same", "jaccard_none"))
        dist = every.get("prior_distance")
        dist = "—" if not dist or dist["mean"] is None else f"{dist['mean']:.3f}"
        b = base.get((dataset, mode, lr, kl, e))
        n = max([st["n"] for st in scores.values() if isinstance(st, dict) and "n" in st] or [0])
        name = f"{mode}, minority" if group == "minority" else mode
        name += f" (lr {lr:g})" if several_lrs else ""
        out.append(f"| {name} | {kl:g} | {e} | {n} | {fmt_lead(lead) if lead else '—'} | "
                   + " | ".join(fmt_lead(scores[m]) if scores.get(m) else "—" for m in PROBE_PAIRS)
                   + f" | {jac} | {dist} | {fmt_lead(b) if b else '—'} |")
    out += ["", "Points, seed by seed (mean ± sd over the seeds). On the multimodal split the lead and the three score "
            "differences are the minority's; the overlap, the distance and the last column are over all clients."]
    return out


def alpha_f_grid(rows: list[dict]) -> dict[str, dict]:
    """Table 9's alpha/F x F grid per mode (MNIST, WAFFLe; multimodal is the paper's Table 9, unimodal the
    ICLR submission's Table 6): {mode: {"ratios": [...], "factors": [...], "cells": {(ratio, F): summary},
    "paper": {(ratio, F): value}}} from ablations.csv's rows."""
    out = {}
    for (table, ds, mode, method, _opt, setting), st in ablation_cells(rows).items():
        if table != "Table 9" or ds != "mnist" or method != "waffle_ibp":
            continue
        g = out.setdefault(mode, {"ratios": set(), "factors": set(), "cells": {}, "paper": {}})
        g["ratios"].add(setting[0])
        g["factors"].add(setting[1])
        g["cells"][setting] = st
        g["paper"][setting] = ablation_paper(table, ds, mode, method, setting)
    for g in out.values():
        g["ratios"], g["factors"] = sorted(g["ratios"]), sorted(g["factors"])
    return dict(sorted(out.items(), key=lambda kv: kv[0] != "multimodal"))   # the paper's own table first


def print_alpha_f(rows: list[dict]) -> None:
    """Each mode's alpha/F x F grid as markdown: ours (mean ± sd over seeds) / the paper's."""
    for mode, g in alpha_f_grid(rows).items():
        n = max(st["n"] + st.get("missing", 0) for st in g["cells"].values())
        src = "Table 9" if mode == "multimodal" else "the ICLR submission's Table 6"
        print(f"\n**alpha/F x F, MNIST {mode}** (local test accuracy, %, {n} seeds): ours / {src}\n")
        print("| α/F | " + " | ".join(f"F = {f}" for f in g["factors"]) + " |")
        print("|---|" + "---|" * len(g["factors"]))
        for a in g["ratios"]:
            cells = []
            for f in g["factors"]:
                st, paper = g["cells"].get((a, f)), ablation_paper("Table 9", "mnist", mode, "waffle_ibp", (a, f))
                cells.append(f"{fmt(st)} / {'—' if paper is None else f'{paper:.2f}'}")
            print(f"| {a:g} | " + " | ".join(cells) + " |")


def _table9_rows(rows: list[dict]) -> list[dict]:
    """Table 9's WAFFLe rows on MNIST, with alpha/F and F as numbers (the CSV reads them as text)."""
    return [{**r, "alpha_ratio": float(r["alpha_ratio"]), "num_factors": int(r["num_factors"])}
            for r in rows if r["table"] == "Table 9" and r["dataset"] == "mnist" and r["method"] == "waffle_ibp"]


def alpha_f_factors(rows: list[dict], layer: str = "fc1") -> dict[str, dict]:
    """Why alpha/F moves Table 9: per mode and (alpha/F, F), the factors each client switches on (b > 0.5 in
    ``layer`` at the last round, mean over seeds) beside the prior's expectation sum_k (a/(1+a))^k with
    a = alpha/F * F, and the accuracies (local; the minority and majority where the split has them).
    {mode: {(ratio, F): {"active": summary, "prior": float, "local_acc": summary, "minority": ..., "majority": ...}}}.
    Cells whose runs logged no active factors (tables written before that metric) are left out."""
    t9 = _table9_rows(rows)
    by = ["mode", "alpha_ratio", "num_factors"]
    active = results.summarize(t9, by, f"active_factors_{layer}")
    out: dict[str, dict] = {}
    for (mode, a, f), st in sorted(active.items()):
        cell = {"active": st, "prior": float(prior_mean_pi(a * f, f, dtype=torch.float64).sum())}
        for m in ("local_acc", "minority", "majority"):
            cell[m] = results.summarize([r for r in t9 if (r["mode"], r["alpha_ratio"], r["num_factors"]) == (mode, a, f)],
                                        by, m).get((mode, a, f))
        out.setdefault(mode, {})[a, f] = cell
    return dict(sorted(out.items(), key=lambda kv: kv[0] != "multimodal"))


def print_alpha_f_factors(rows: list[dict]) -> None:
    """alpha_f_factors as markdown: one row per (mode, alpha/F, F)."""
    got = alpha_f_factors(rows)
    if not got:
        return
    print("\n**Factors switched on against alpha/F** (MNIST, WAFFLe, fc1: factors per client with b > 0.5 at the "
          "last round, mean ± sd over seeds; the prior's expectation is sum_k (α/(1+α))^k)\n")
    print("| mode | α/F | F | active | prior | active / F | local acc | minority | majority |")
    print("|---|---|---|---|---|---|---|---|---|")
    for mode, cells in got.items():
        for (a, f), c in cells.items():
            print(f"| {mode} | {a:g} | {f} | {fmt(c['active'])} | {c['prior']:.1f} | {c['active']['mean'] / f:.2f} | "
                  f"{fmt(c['local_acc'])} | {fmt(c['minority'])} | {fmt(c['majority'])} |")
    print("\nWhat the smallest α/F gains over the largest, seed by seed (points, mean ± sd over the paired seeds):\n")
    print("| mode | F | α/F | local acc | minority | majority |")
    print("|---|---|---|---|---|---|")
    for (mode, f), (lo, hi, d) in alpha_f_paired(rows).items():
        print(f"| {mode} | {f} | {lo:g} − {hi:g} | " + " | ".join(fmt_lead(d[m]) if d.get(m) else "—"
                                                            for m in ("local_acc", "minority", "majority")) + " |")


def alpha_f_paired(rows: list[dict]) -> dict[tuple, tuple]:
    """Per (mode, F): (smallest alpha/F, largest, {metric: summary of smallest − largest, paired by seed}) for
    the local accuracy and, where the split has them, the minority and majority (Table 9's rows)."""
    t9 = _table9_rows(rows)
    out = {}
    for mode, f in sorted({(r["mode"], r["num_factors"]) for r in t9}, key=lambda k: (k[0] != "multimodal", k[1])):
        cell = [r for r in t9 if (r["mode"], r["num_factors"]) == (mode, f)]
        lo, hi = min(r["alpha_ratio"] for r in cell), max(r["alpha_ratio"] for r in cell)
        if lo == hi:
            continue
        out[mode, f] = (lo, hi, {m: results.paired_difference(cell, ["mode"], "alpha_ratio", lo, hi, m).get((mode,))
                                 for m in ("local_acc", "minority", "majority")})
    return out


def open_choices_grid(rows: list[dict], metric: str = "minority") -> dict[str, dict]:
    """Per step rule: the KL weights (rows), the selection rates (columns) and each cell's summary of
    ``metric`` over seeds (mean, sd, n, missing: the seeds that diverged), from open_choices.csv's rows."""
    out = {}
    st = results.summarize(rows, ["selection_optimizer", "kl_weight", "selection_lr"], metric)
    for (opt, kw, lr), s in st.items():
        g = out.setdefault(opt, {"kl_weight": set(), "selection_lr": set(), "cells": {}})
        g["kl_weight"].add(float(kw))
        g["selection_lr"].add(float(lr))
        g["cells"][float(kw), float(lr)] = s
    for g in out.values():
        g["kl_weight"], g["selection_lr"] = sorted(g["kl_weight"]), sorted(g["selection_lr"])
    return out


def within_paper(st: dict | None, paper) -> bool:
    """Whether the paper's number lies in the cell's mean ± sd (the paper gives Table 1 without a spread)."""
    return (st is not None and paper is not None and st["mean"] is not None and not st.get("missing")
            and st["sd"] is not None and abs(st["mean"] - paper) <= st["sd"])


def fedavg_minority(table12_rows: list[dict], ds: str) -> dict:
    """{seed: FedAvg's minority accuracy} on ``ds``'s multimodal split with the paper's minority (Table 1's rows)."""
    preset = "-".join(str(c) for c in MULTIMODAL_PRESETS.get(ds, [((), 0)])[-1][0])
    return {r["seed"]: r["value"] for r in table12_rows
            if (r["dataset"], r["mode"], r["method"], r["metric"]) == (ds, "multimodal", "fedavg", "minority")
            and not r["variant"] and r["minority_classes"] == preset and r["value"] is not None}


def lead_rows(rows: list[dict], fedavg: dict) -> list[dict]:
    """The minority rows as leads over FedAvg's minority at the same seed (same split); seeds without a
    FedAvg run are left out, a diverged cell stays a missing value."""
    return [{**r, "value": None if r["value"] is None else r["value"] - fedavg[r["seed"]]}
            for r in rows if r["metric"] == "minority" and r["seed"] in fedavg]


def _print_grid(g: dict, paper, sign: str = "") -> None:
    print("| KL weight | " + " | ".join(f"rate {lr:g}" for lr in g["selection_lr"]) + " |")
    print("|---|" + "---|" * len(g["selection_lr"]))
    for kw in g["kl_weight"]:
        cells = []
        for lr in g["selection_lr"]:
            st = g["cells"].get((kw, lr))
            text = "—" if st is None else (fmt(st) if st.get("missing") or not sign else _mean_sd(st, sign))
            text += "" if st is None or st.get("missing") else f" ({st['n']})"
            cells.append(f"**{text}**" if within_paper(st, paper) else text)
        print(f"| {kw:g} | " + " | ".join(cells) + " |")


def print_open_choices(rows: list[dict], meta: dict, fedavg: dict | None = None) -> None:
    """The map per step rule, and where ``fedavg`` ({seed: minority}) is given, the same map as WAFFLe's lead
    over FedAvg seed by seed: the split decides much of the minority's level, the lead is what a choice adds."""
    print(*results.provenance_comments(meta), sep="\n")
    datasets = sorted({r["dataset"] for r in rows})
    for ds in datasets:
        paper = WAFFLE_IBP_TABLE1["minority"].get(ds, {}).get("waffle_ibp")
        paper_fedavg = WAFFLE_IBP_TABLE1["minority"].get(ds, {}).get("fedavg")
        print(f"\n**The open choices mapped** ({ds} multimodal; the minority's local test accuracy, %, mean ± sd "
              f"over seeds; **bold**: the paper's {paper} lies within the cell's spread; its FedAvg: {paper_fedavg})")
        mine = [r for r in rows if r["dataset"] == ds]
        leads = open_choices_grid(lead_rows(mine, fedavg)) if fedavg and ds == "mnist" else {}
        for opt, g in open_choices_grid(mine).items():
            rule = {"sgd": "SGD", "adam": "Adam"}.get(opt, opt)
            print(f"\nSelections stepped by {rule}: the minority's accuracy (%; bold: the paper's {paper} within the "
                  "spread)\n")
            _print_grid(g, paper)
            if opt in leads:
                lead_paper = None if paper is None or paper_fedavg is None else round(paper - paper_fedavg, 2)
                print(f"\nSelections stepped by {rule}: WAFFLe's lead over FedAvg's minority, seed by seed (points; "
                      f"FedAvg's seeds {', '.join(map(str, sorted(fedavg)))}; bold: the paper's {lead_paper:+.2f} "
                      "within the spread)\n")
                _print_grid(leads[opt], lead_paper, sign="+")


def by_z(z_rows: list[dict], table12_rows: list[dict]) -> list[dict]:
    """Per (dataset, Z): FedAvg's and WAFFLe's unimodal local accuracy and WAFFLe's lead, seed by seed.

    Z = 2 comes from Table 2's unimodal rows, with the WAFFLe variant the Z runs used (so one setting of
    the open choices throughout); Z = 3, 4 from heterogeneity.csv (its shards_per_client column)."""
    variants = {r["variant"] for r in z_rows if r["method"] == "waffle_ibp"}
    keep = lambda r: r["mode"] == "unimodal" and (r["method"] == "fedavg" or  # noqa: E731
                                                  (r["method"] == "waffle_ibp" and r["variant"] in variants))
    both = [{**r, "Z": 2} for r in table12_rows if keep(r) and r["dataset"] in {z["dataset"] for z in z_rows}]
    both += [{**r, "Z": int(r["shards_per_client"])} for r in z_rows if keep(r)]
    acc = results.summarize(both, ["dataset", "Z", "method"], "local_acc")
    lead = results.paired_difference(both, ["dataset", "Z"], "method", "waffle_ibp", "fedavg", "local_acc")
    out = []
    for (ds, z), st in sorted(lead.items(), key=str):
        p = WAFFLE_IBP_TABLE2.get(ds, {})
        paper = (p["waffle_ibp"][0] - p["fedavg"][0]) if z == 2 and p else None
        out.append({"dataset": ds, "Z": z, "fedavg": acc.get((ds, z, "fedavg")), "waffle_ibp": acc.get((ds, z, "waffle_ibp")),
                    "lead": st, "paper_lead": paper, "paper_lead_cifar10": WAFFLE_IBP_FIG7_GAP.get(z)})
    return out


def print_by_z(table12_rows: list[dict], z_rows: list[dict], meta: dict) -> None:
    print(*results.provenance_comments(meta), sep="\n")
    print("\n**Fig. 7** (unimodal, Z classes per client; local test accuracy, %): WAFFLe's lead over FedAvg, "
          "seed by seed\n")
    print("| dataset | Z | seeds | FedAvg | WAFFLe | WAFFLe − FedAvg | paper, same dataset | paper, CIFAR-10 |")
    print("|---|---|---|---|---|---|---|---|")
    for r in by_z(z_rows, table12_rows):
        paper = "—" if r["paper_lead"] is None else f"{r['paper_lead']:+.2f}"
        cifar = "—" if r["paper_lead_cifar10"] is None else f"{r['paper_lead_cifar10']:+.2f}"
        print(f"| {r['dataset']} | {r['Z']} | {r['lead']['n']} | {fmt(r['fedavg'])} | {fmt(r['waffle_ibp'])} | "
              f"{fmt_lead(r['lead'])} | {paper} | {cifar} |")


if __name__ == "__main__":
    main()
