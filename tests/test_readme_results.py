"""scripts/readme_results.py: the README's generated tables equal what the table scripts print from results/."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from fltutor import results

ROOT = Path(__file__).resolve().parent.parent
rr = results.load_script("readme_results")


def test_the_committed_readme_matches_results():
    """The real check: a merge into results/ that leaves the README behind fails here, with the command to run."""
    text = (ROOT / "README.md").read_text()
    assert len(rr.blocks(text.split("\n"))) >= 8
    new, changed = rr.render(text)
    assert not changed, f"stale README blocks {changed}: run python scripts/readme_results.py"
    assert new == text


@pytest.fixture
def tree(tmp_path):
    """A checkout in miniature: a table script that prints its arguments, and one that fails."""
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "echo_table.py").write_text(
        "import sys\nprint('| a | b |')\nprint('|---|---|')\nprint('| ' + ' | '.join(sys.argv[1:]) + ' |')\n")
    (tmp_path / "scripts" / "broken_table.py").write_text("raise SystemExit('no results/x/y.csv yet')\n")
    return tmp_path


def doc(body: str, cmd: str = "python scripts/echo_table.py 1 2") -> str:
    return f"# title\n\nprose before\n\n<!-- results: {cmd} -->\n{body}\n<!-- /results -->\n\nprose after\n"


def test_render_refills_only_the_block_and_is_idempotent(tree):
    new, changed = rr.render(doc("| old | table |"), tree)
    assert changed == ["python scripts/echo_table.py 1 2"]
    assert new == doc("| a | b |\n|---|---|\n| 1 | 2 |")      # prose before and after untouched
    again, changed = rr.render(new, tree)
    assert again == new and changed == []


def test_two_blocks_with_one_command_run_it_once(tree, monkeypatch):
    calls = []
    real = rr.run_script
    monkeypatch.setattr(rr, "run_script", lambda cmd, root: calls.append(cmd) or real(cmd, root))
    text = doc("x") + doc("y")
    new, changed = rr.render(text, tree)
    assert len(calls) == 1 and len(changed) == 2
    assert new.count("| 1 | 2 |") == 2


@pytest.mark.parametrize("text, words", [
    ("<!-- results: python scripts/echo_table.py -->\nbody\n", "never closed"),
    ("body\n<!-- /results -->\n", "without a"),
    ("<!-- results: python scripts/echo_table.py -->\n<!-- results: python scripts/echo_table.py -->\n"
     "<!-- /results -->\n", "begins inside"),
    (doc("x", "bash scripts/echo_table.py"), "expected 'python scripts/<name>.py"),
    (doc("x", "python ../echo_table.py"), "expected 'python scripts/<name>.py"),
    (doc("x", "python scripts/missing_table.py"), "does not exist"),
    (doc("x", "python scripts/broken_table.py"), "failed: no results/x/y.csv yet"),
])
def test_bad_markers_name_the_line_or_command(tree, text, words):
    with pytest.raises(rr.BlockError, match=re.escape(words)):
        rr.render(text, tree)


def test_an_inline_value_is_refilled_in_its_line_and_the_prose_around_it_kept(tree):
    (tree / "scripts" / "echo_value.py").write_text("import sys\nprint(' '.join(sys.argv[1:]))\n")
    line = "GMA trails by <!-- value: python scripts/echo_value.py 4.0 -->9.9<!-- /value --> points, in " \
           "<!-- value: python scripts/echo_value.py 14 of 15 -->3 of 4<!-- /value --> seeds."
    new, changed = rr.render(doc("x") + line + "\n", tree)
    assert new.endswith("GMA trails by <!-- value: python scripts/echo_value.py 4.0 -->4.0<!-- /value --> points, in "
                        "<!-- value: python scripts/echo_value.py 14 of 15 -->14 of 15<!-- /value --> seeds.\n")
    assert changed == ["python scripts/echo_table.py 1 2", "python scripts/echo_value.py 4.0",
                       "python scripts/echo_value.py 14 of 15"]
    assert rr.render(new, tree) == (new, [])


@pytest.mark.parametrize("line, words", [
    ("a <!-- value: python scripts/echo_table.py --> b", "needs its '<!-- /value -->' on the same line"),
    ("a <!-- value: python scripts/echo_table.py -->x<!-- /value -->", "printed 3 lines; a value is one line"),
    ("a <!-- value: python scripts/missing_table.py -->x<!-- /value -->", "does not exist"),
])
def test_bad_value_markers_name_the_line(tree, line, words):
    with pytest.raises(rr.BlockError, match=re.escape(words)):
        rr.render("prose\n" + line + "\n", tree)


def test_check_reports_a_stale_block_and_writes_nothing(tmp_path, capsys):
    """Against a real table script: --check exits 1 with a diff and leaves the file; a plain run refills it."""
    readme = tmp_path / "README.md"
    cmd = "python scripts/privacy_table.py mnist"
    readme.write_text(doc("| stale | numbers |", cmd))
    before = readme.read_text()
    assert rr.main(["--file", str(readme), "--check"]) == 1
    out, err = capsys.readouterr()
    assert "-| stale | numbers |" in out and "1 of 1 generated blocks and values are stale" in err
    assert readme.read_text() == before
    assert rr.main(["--file", str(readme)]) == 0
    assert "| stale" not in readme.read_text()
    assert rr.main(["--file", str(readme), "--check"]) == 0
    assert "all 1 generated blocks and values match" in capsys.readouterr().out


def test_a_broken_marker_exits_2(tmp_path, capsys):
    readme = tmp_path / "README.md"
    readme.write_text("<!-- results: python scripts/privacy_table.py mnist -->\nno end\n")
    assert rr.main(["--file", str(readme), "--check"]) == 2
    assert "never closed" in capsys.readouterr().err


def gma_table(monkeypatch, capsys, folder, *args) -> str:
    """What ``python scripts/gma_table.py --folder FOLDER ARGS`` prints."""
    import sys
    monkeypatch.setattr(sys, "argv", ["gma_table.py", "--folder", str(folder), *args])
    results.load_script("gma_table").main()
    return capsys.readouterr().out


def test_a_section_at_one_round_count_shows_only_those_runs_and_the_commands_that_made_them(tmp_path, monkeypatch,
                                                                                              capsys):
    """Table 10 holds a 15-round CPU grid beside the 100-round one; --rounds keeps each block to its own rows and
    provenance, and --section drops the heading the whole print carries."""
    def row(rounds, agg, seed, value):
        return {"dataset": "fashionmnist", "skew": "label", "clients": 10, "algorithm": "fedavg", "aggregation": agg,
                "server_lr": 1.0, "lr": 0.01, "tau": 0.4, "momentum": 0.9, "seed": seed, "rounds": rounds,
                "metric": "best_global_acc", "value": value}
    for rounds, vals in ((15, (50.0, 52.0)), (100, (80.0, 84.0))):
        rows = [row(rounds, agg, s, v + (1 if agg == "GMA" else 0)) for agg in ("AVG", "GMA") for s, v in enumerate(vals)]
        results.write_table(tmp_path, "table10", rows, results.provenance(
            command=f"grid{rounds}", scale="full scale" if rounds == 100 else "reduced scale: test",
            settings={"grid_rounds": rounds}), merge=True)
    whole = gma_table(monkeypatch, capsys, tmp_path)
    assert whole.startswith("Table 10\n") and "grid15" in whole and "grid100" in whole
    out = gma_table(monkeypatch, capsys, tmp_path, "--section", "table10", "--rounds", "15")
    assert not out.startswith("Table 10") and "grid15" in out and "grid100" not in out
    # by hand: AVG 50, 52 -> 51.00 ± 1.41; GMA 51, 53 -> 52.00 ± 1.41
    assert "| 1 | 0.01 | 51.00 ± 1.41 | 52.00 ± 1.41 | +1.00 | no |" in out and "82.00" not in out
    out = gma_table(monkeypatch, capsys, tmp_path, "--section", "table10", "--rounds", "100")
    assert "grid100" in out and "grid15" not in out and "| 1 | 0.01 | 82.00 ± 2.83 | 83.00 ± 2.83 |" in out
    with pytest.raises(SystemExit, match="--section fig4: no .*fig4.csv yet"):
        gma_table(monkeypatch, capsys, tmp_path, "--section", "fig4")


def test_tables2_3_names_settings_in_words_and_fedprox_with_its_mu(tmp_path, monkeypatch, capsys):
    def row(dataset, skew, algo, agg, seed, value):
        return {"dataset": dataset, "skew": skew, "clients": 500, "algorithm": algo, "aggregation": agg,
                "lr_choice": "fixed", "lr": 0.05, "server_lr": 1.0, "seed": seed, "rounds": 200,
                "metric": "best_global_acc", "value": value}
    # GMA ahead by 2 and 4 in the two seeds: +3.00 ± 1.41, beyond its sd, so "yes, GMA ahead"
    rows = [row("fashionmnist", "label", "fedprox", agg, s, v + (2 + 2 * s if agg == "GMA" else 0))
            for agg in ("AVG", "GMA") for s, v in enumerate((70.0, 72.0))]
    rows += [row("mnist", "mixed-shared", "fedavg", agg, s, 90.0) for agg in ("AVG", "GMA") for s in range(2)]
    results.write_table(tmp_path, "tables2_3", rows, results.provenance(
        command="t", settings={"algorithms": ["fedprox"], "mu": 0.01}))
    out = gma_table(monkeypatch, capsys, tmp_path, "--section", "tables2_3")
    assert "| FMNIST, 2-class, 500 clients | FedProx (μ = 0.01) | 0.05 / 1 (fixed) | 2 |" in out
    assert "| +3.00 ± 1.41 | yes, GMA ahead |" in out
    assert "| FedCMNIST mixed skew, one colour map shared by the training clients and reversed at test (ours, not a " \
           "paper row), 500 clients | FedAvg |" in out
    assert out.index("FedProx") < out.index("FedCMNIST")      # label skew first, as the paper orders its rows
    # two commands that ran FedProx at different mu: the name says so instead of picking one
    results.write_table(tmp_path, "tables2_3", rows[:4], results.provenance(
        command="t2", settings={"algorithms": ["fedprox"], "mu": 1.0}), merge=True)
    assert "FedProx (μ: see the JSON)" in gma_table(monkeypatch, capsys, tmp_path, "--section", "tables2_3")


def test_the_readme_contents_links_reach_its_headings():
    """Every in-page link of the README names a heading's anchor, as GitHub forms it (lower case, punctuation
    other than '-' and '_' dropped, spaces to '-'), or an explicit `<a id="...">` in the prose: renaming a heading
    or dropping an anchor must not leave a contents line dead. No explicit anchor sits inside a generated block,
    where the next `readme_results.py` would drop it."""
    text = (ROOT / "README.md").read_text()
    anchors = {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-")
               for h in re.findall(r"^#{1,6} (.+)$", text, flags=re.M)}
    explicit = re.findall(r'<a id="([^"]+)"></a>', text)
    assert len(explicit) == len(set(explicit)) and not anchors & set(explicit)
    links = re.findall(r"\]\(#([^)]+)\)", text)
    assert links and not [a for a in links if a not in anchors | set(explicit)]
    assert set(explicit) <= set(links)                      # every anchor is reached from a contents line
    generated = "".join(re.findall(r"<!-- results:.*?<!-- /results -->", text, flags=re.S))
    assert "<a id=" not in generated


def test_the_notebooks_links_into_the_readme_reach_an_anchor():
    """A notebook's `../README.md#x` link names a heading or an explicit anchor the README has (the README's own
    links are checked above)."""
    text = (ROOT / "README.md").read_text()
    anchors = {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-")
               for h in re.findall(r"^#{1,6} (.+)$", text, flags=re.M)} | set(re.findall(r'<a id="([^"]+)"></a>', text))
    links = {(nb.name, a) for nb in sorted((ROOT / "notebooks").glob("*.ipynb"))
             for a in re.findall(r"\(\.\./README\.md#([^)]+)\)", nb.read_text())}
    assert len(links) >= 5 and not [x for x in links if x[1] not in anchors]


def test_a_merge_into_this_checkout_says_which_readme_tables_now_lag(tmp_path, monkeypatch, capsys):
    import fltutor.__main__ as cli
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "readme_results.py").write_text("")      # the hint only looks for it
    (tmp_path / "README.md").write_text(doc("| stale |", "python scripts/privacy_table.py mnist"))
    monkeypatch.setattr(cli, "ROOT", tmp_path)
    cli.readme_hint()
    assert ("README: 1 generated table(s) or value(s) now lag results/ (python scripts/privacy_table.py mnist); refill them with "
            "python scripts/readme_results.py") in capsys.readouterr().out
    (tmp_path / "README.md").write_text(rr.render(doc("x", "python scripts/privacy_table.py mnist"))[0])
    cli.readme_hint()
    assert capsys.readouterr().out == ""                                      # nothing lags: nothing said


def test_the_rate_probe_grid_by_hand(tmp_path, monkeypatch, capsys):
    """One row per (momentum, inputs, batch), a column per client rate: mean best / final, or the divergence."""
    def run(mom, lr, seed, best, final, stop):
        ids = {"dataset": "fashionmnist", "skew": "label", "clients": 10, "algorithm": "fedavg", "aggregation": "AVG",
               "inputs": "unit", "batch_size": 32, "lr": lr, "momentum": mom, "server_lr": 1.0, "seed": seed,
               "rounds": 10}
        return [{**ids, "metric": "best_global_acc", "value": best}, {**ids, "metric": "final_global_acc", "value": final},
                {**ids, "metric": "diverged_round", "value": stop}]
    rows = (run(0.9, 0.01, 0, 60.0, 50.0, None) + run(0.9, 0.01, 1, 62.0, 54.0, None)
            + run(0.9, 0.1, 0, None, None, 3) + run(0.0, 0.1, 0, 70.0, 69.0, None))
    results.write_table(tmp_path, "rate_probe", rows, results.provenance(command="probe"))
    out = gma_table(monkeypatch, capsys, tmp_path, "--section", "rate_probe_grid")
    assert "| client momentum | inputs | batch | rate 0.01 | rate 0.1 |" in out
    assert "| 0.9 (the paper's) | unit | 32 | 61.00 / 52.00 | diverged, round 3 |" in out     # (60+62)/2, (50+54)/2
    assert "| 0 | unit | 32 | — | 70.00 / 69.00 |" in out


def test_gma_values_for_the_prose_match_a_hand_count(tmp_path, monkeypatch, capsys):
    """--value small-steps / seeds / diff on a toy Table 10: the cells where client x server rate is 1e-4 to 1e-3,
    counted by hand, and a cell with a diverged run left out."""
    rows = []
    def add(g, l, seed, avg, gma, momentum=0.9):
        for agg, v in (("AVG", avg), ("GMA", gma)):
            rows.append({"dataset": "fashionmnist", "skew": "label", "clients": 10, "algorithm": "fedavg",
                         "aggregation": agg, "server_lr": g, "lr": l, "tau": 0.4, "momentum": momentum, "seed": seed,
                         "rounds": 100, "metric": "best_global_acc", "value": v})
    add(0.1, 0.01, 0, 70.0, 64.0)      # product 0.001: -6
    add(0.1, 0.01, 1, 72.0, 70.0)      # -2     -> cell mean -4
    add(1.0, 0.001, 0, 75.0, 76.0)     # product 0.001: +1
    add(1.0, 0.001, 1, 75.0, 70.0)     # -5     -> cell mean -2
    add(1.0, 0.001, 2, 75.0, 73.0)     # -2
    add(2.0, 0.01, 0, 80.0, 81.5)      # product 0.02: outside
    add(2.0, 0.01, 1, 80.0, 80.0)
    add(1.0, 0.1, 0, None, None)       # diverged: no cell
    add(0.01, 0.01, 0, 30.0, 20.0, momentum=0.0)   # another grid: not counted
    results.write_table(tmp_path, "table10", rows, results.provenance(command="toy", scale="full scale"))
    assert gma_table(monkeypatch, capsys, tmp_path, "--value", "small-steps") == "by 2.0-4.0 points, in 4 of 5 seed runs\n"
    assert gma_table(monkeypatch, capsys, tmp_path, "--value", "seeds") == "2-3\n"
    assert gma_table(monkeypatch, capsys, tmp_path, "--value", "diff", "2", "0.01") == "+0.75, 2 seeds\n"
    assert gma_table(monkeypatch, capsys, tmp_path, "--value", "diff", "0.1", "0.01") == "\u22124.00, 2 seeds\n"
    # the momentum-0 grid: one cell, 30 / 20 -> -10; the paper's AVG at server 0.01 / client 0.01 is 56.06
    results.write_table(tmp_path, "table10_momentum0", [r for r in rows if r["momentum"] == 0.0],
                        results.provenance(command="toy0", scale="full scale"))
    assert gma_table(monkeypatch, capsys, tmp_path, "--value", "diff-momentum0", "0.01", "0.01", "0") == "\u221210.00, 1 seed\n"
    assert gma_table(monkeypatch, capsys, tmp_path, "--value", "grid-range-momentum0") == (
        "\u221210.00 to \u221210.00, 1 cells, 1 seeds each\n")
    assert gma_table(monkeypatch, capsys, tmp_path, "--value", "avg-gap-momentum0") == "26.1-26.1\n"
    # a second cell at server rate 1 (80 / 82 -> +2): the server-rate bounds pick the cells by hand
    add(1.0, 0.01, 0, 80.0, 82.0, momentum=0.0)
    results.write_table(tmp_path, "table10_momentum0", [r for r in rows if r["momentum"] == 0.0],
                        results.provenance(command="toy0", scale="full scale"))
    assert gma_table(monkeypatch, capsys, tmp_path, "--value", "grid-range-momentum0") == (
        "\u221210.00 to +2.00, 2 cells, 1 seeds each\n")
    assert gma_table(monkeypatch, capsys, tmp_path, "--value", "grid-range-momentum0", "0", "0", "0.1") == (
        "\u221210.00 to \u221210.00, 1 cells, 1 seeds each\n")
    assert gma_table(monkeypatch, capsys, tmp_path, "--value", "grid-range-momentum0", "0", "1", "2") == (
        "+2.00 to +2.00, 1 cells, 1 seeds each\n")
    assert gma_table(monkeypatch, capsys, tmp_path, "--value", "avg-gap-momentum0", "0", "0", "0.1") == "26.1-26.1\n"
    results.write_table(tmp_path, "table10_momentum0", [r for r in rows if r["momentum"] == 0.0 and r["server_lr"] < 1],
                        results.provenance(command="toy0", scale="full scale"))
    with pytest.raises(SystemExit, match="no AVG cell"):   # the one cell is at server rate 0.01
        gma_table(monkeypatch, capsys, tmp_path, "--value", "avg-gap-momentum0", "0", "1")
    with pytest.raises(SystemExit, match="no cell without a diverged run"):
        gma_table(monkeypatch, capsys, tmp_path, "--value", "grid-range-momentum0", "0", "1")
    with pytest.raises(SystemExit, match="no such cell"):
        gma_table(monkeypatch, capsys, tmp_path, "--value", "diff", "1", "0.1")
    with pytest.raises(SystemExit, match="is not one of"):
        gma_table(monkeypatch, capsys, tmp_path, "--value", "nonsense")
    with pytest.raises(SystemExit, match=re.escape("--value diff: takes SERVER_LR LR [MOMENTUM] [METRIC]; got ['2']")):
        gma_table(monkeypatch, capsys, tmp_path, "--value", "diff", "2")
    with pytest.raises(SystemExit, match="could not convert string to float: 'two'"):
        gma_table(monkeypatch, capsys, tmp_path, "--value", "diff", "two", "0.01")


def test_the_ablation_value_is_the_seed_by_seed_lead_of_the_last_10_mean(tmp_path, monkeypatch, capsys):
    rows = [{"dataset": "fashionmnist", "skew": "label", "varied": "momentum", "value_varied": 0.0, "clients": 10,
             "local_epochs": 1, "momentum": 0.0, "lr": 0.01, "server_lr": 1.0, "tau": 0.4, "rounds": 100, "seed": seed,
             "aggregation": agg, "metric": metric, "value": v}
            for seed, (avg, gma) in enumerate([(81.0, 77.0), (77.0, 75.0)])
            for agg, v0 in (("AVG", avg), ("GMA", gma))
            for metric, v in (("last10_global_acc", v0), ("best_global_acc", v0 + 1))]
    results.write_table(tmp_path, "ablations_full", rows, results.provenance(command="toy", scale="full scale"))
    # by hand: leads -4 and -2, mean -3, sample sd sqrt(2) = 1.41
    assert gma_table(monkeypatch, capsys, tmp_path, "--value", "ablation", "momentum", "0") == "\u22123.00 ± 1.41, 2 seeds\n"
    with pytest.raises(SystemExit, match="need exactly 1"):
        gma_table(monkeypatch, capsys, tmp_path, "--value", "ablation", "clients", "10")
    with pytest.raises(SystemExit, match="is not one of clients"):
        gma_table(monkeypatch, capsys, tmp_path, "--value", "ablation", "tau", "0.4")


def test_the_ablation_range_names_the_seeds_behind_each_value(tmp_path, monkeypatch, capsys):
    def rows_for(n, seed, avg, gma):
        return [{"dataset": "fashionmnist", "skew": "label", "varied": "clients", "value_varied": float(n), "clients": n,
                 "local_epochs": 1, "momentum": 0.9, "lr": 0.01, "server_lr": 1.0, "tau": 0.4, "rounds": 100, "seed": seed,
                 "aggregation": agg, "metric": "last10_global_acc", "value": v} for agg, v in (("AVG", avg), ("GMA", gma))]
    rows = rows_for(10, 0, 80.0, 79.0) + rows_for(10, 1, 80.0, 82.0) + rows_for(50, 0, 70.0, 68.0) + rows_for(100, 0, 60.0, 60.5)
    results.write_table(tmp_path, "ablations_full", rows, results.provenance(command="toy", scale="full scale"))
    # by hand: N = 10 leads -1 and +2 (mean +0.5), N = 50 -2, N = 100 +0.5
    assert gma_table(monkeypatch, capsys, tmp_path, "--value", "ablation-range", "clients") == (
        "\u22122.00 to +0.50; seeds 0-1 at N = 10; seed 0 at N = 50 and 100\n")


def test_table_9_takes_its_e_1_point_from_table_8s_n_10_runs(tmp_path, monkeypatch, capsys):
    """N = 10, E = 1 and momentum 0.9 are one run: a Table 9 of its own rows (E = 3) shows E = 1 from Table 8's
    N = 10 runs, labelled, and --value reads both; a table with no rows of its own gets no copy."""
    def rows_for(varied, value, seed, avg, gma, epochs=1):
        return [{"dataset": "fashionmnist", "skew": "label", "varied": varied, "value_varied": float(value),
                 "clients": 10, "local_epochs": epochs, "momentum": 0.9, "lr": 0.01, "server_lr": 1.0, "tau": 0.4,
                 "rounds": 100, "seed": seed, "aggregation": agg, "metric": m, "value": v + (m == "best_global_acc")}
                for agg, v in (("AVG", avg), ("GMA", gma)) for m in ("last10_global_acc", "best_global_acc")]
    rows = (rows_for("clients", 10, 0, 80.0, 79.0) + rows_for("clients", 10, 1, 80.0, 83.0)
            + rows_for("epochs", 3, 0, 84.0, 82.5, epochs=3))
    results.write_table(tmp_path, "ablations_full", rows, results.provenance(command="toy", scale="full scale"))
    out = gma_table(monkeypatch, capsys, tmp_path, "--section", "ablations")
    # by hand: N = 10 leads -1 and +3: +1.00 ± 2.83; AVG 80 ± 0, GMA 81 ± 2.83; E = 3 one seed, -1.5
    assert ("| Table 9 | epochs | 1 (the clients 10 runs) | 0.01 / 1 | 2 | 80.00 ± 0.00 | 81.00 ± 2.83 | "
            "+1.00 ± 2.83 |") in out
    assert "| Table 9 | epochs | 3 | 0.01 / 1 | 1 | 84.00 | 82.50 | -1.50 | — | 85.00 | 83.50 |" in out
    assert "| Table 8 | clients | 10 | 0.01 / 1 | 2 |" in out
    assert "Table 6" not in out   # no momentum rows of its own: no copied 0.9 row
    assert gma_table(monkeypatch, capsys, tmp_path, "--value", "ablation", "epochs", "3") == "\u22121.50, 1 seed\n"
    assert gma_table(monkeypatch, capsys, tmp_path, "--value", "ablation", "epochs", "1") == "+1.00 ± 2.83, 2 seeds\n"
    assert gma_table(monkeypatch, capsys, tmp_path, "--value", "ablation-range", "epochs") == (
        "\u22121.50 to +1.00; seeds 0-1 at E = 1; seed 0 at E = 3\n")
