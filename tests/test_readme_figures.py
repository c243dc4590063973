"""scripts/readme_figures.py: the README's figures record the tables they were drawn from, and a figure that lags
results/ fails here (as a stale README table fails tests/test_readme_results.py)."""
import shutil
from pathlib import Path

import pytest
from PIL import Image

from fltutor import plots, results


@pytest.fixture(scope="module")
def mod(load_script):
    return load_script("readme_figures")


def copy_tables(mod, root):
    """Every table the figures read, copied under ``root`` at its path below results/."""
    for _, tables in mod.FIGURES.values():
        for src in mod.sources(tables, results.RESULTS_DIR):
            dst = root / src.relative_to(results.RESULTS_DIR)
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, dst)


def test_the_committed_figures_match_results(mod):
    assert mod.stale(results.RESULTS_DIR, mod.OUT) == [], "run: python scripts/readme_figures.py, look, commit"


def test_a_changed_or_missing_table_makes_its_figure_stale(mod, tmp_path):
    copy_tables(mod, tmp_path)
    assert mod.stale(tmp_path, mod.OUT) == []      # the same bytes under another root: nothing lags
    csv = tmp_path / "waffle_weighted" / "table1.csv"
    csv.write_text(csv.read_text() + "\n")          # one more byte, as a merge would add rows
    got = mod.stale(tmp_path, mod.OUT)
    assert len(got) == 1 and got[0].startswith("waffle_weighted_table1.png: drawn from waffle_weighted/table1.csv")
    out = tmp_path / "figures"
    out.mkdir()
    shutil.copy(mod.OUT / "gma_table10.png", out)
    assert sorted(line.split(":")[0] for line in mod.stale(tmp_path, out)) == [
        "gma_ablations.png", "gma_tables2_3.png", "privacy_audit.png", "waffle_ibp_epochs.png", "waffle_ibp_table1.png",
        "waffle_weighted_collapse.png", "waffle_weighted_table1.png"]   # missing ones too


def test_drawing_records_the_sha256_of_every_table_it_read(mod, tmp_path):
    import hashlib
    assert mod.main(["--out", str(tmp_path)]) == 0
    text = Image.open(tmp_path / "gma_table10.png").text["Source"]
    digest = hashlib.sha256((results.RESULTS_DIR / "gma" / "table10.csv").read_bytes()).hexdigest()[:16]
    assert f"gma/table10.csv sha256:{digest}" in text and "gma/table10.json sha256:" in text
    assert mod.main(["--check", "--out", str(tmp_path)]) == 0


def test_an_edit_to_the_drawing_code_makes_every_figure_stale(mod, tmp_path, monkeypatch):
    copy_tables(mod, tmp_path)
    assert mod.stale(tmp_path, mod.OUT) == []
    edited = tmp_path / "plots.py"
    edited.write_text(Path(mod.plots.__file__).read_text() + "\n# a changed line\n")
    monkeypatch.setattr(mod.plots, "__file__", str(edited))
    got = mod.stale(tmp_path, mod.OUT)
    assert sorted(line.split(":")[0] for line in got) == sorted(mod.FIGURES)
    assert all("the drawing code is now" in line and "plots.py sha256:" in line for line in got)


def test_a_merge_into_this_checkout_names_the_figures_that_now_lag(mod, tmp_path, monkeypatch, capsys):
    import fltutor.__main__ as cli
    copy_tables(mod, tmp_path / "results")
    shutil.copytree(mod.OUT, tmp_path / "docs" / "figures")
    (tmp_path / "scripts").mkdir()
    for name in ("readme_results.py", "readme_figures.py"):   # the hint only looks for them (the checkout's run)
        (tmp_path / "scripts" / name).write_text("")
    (tmp_path / "README.md").write_text("no generated tables\n")
    monkeypatch.setattr(cli, "ROOT", tmp_path)
    cli.readme_hint()
    assert capsys.readouterr().out == ""                                      # nothing lags: nothing said
    (tmp_path / "results" / "gma" / "table10.json").write_text((tmp_path / "results" / "gma" / "table10.json").read_text() + " ")
    cli.readme_hint()
    assert capsys.readouterr().out == ("README: 1 figure(s) now lag results/ or the drawing code (gma_table10.png); redraw "
                                       "them with python scripts/readme_figures.py\n")


def test_the_tables2_3_figure_plots_the_leads_the_readme_table_prints(mod):
    """The figure's seed-by-seed GMA − AVG (its own grouping of the rows) has the mean, sd and count of
    results.paired_difference, which the README's Tables 2-3 table prints, for every row and way of choosing the
    rates; and the picks it writes beside each row are the pairs those rows ran."""
    rows, _ = results.read_table(results.RESULTS_DIR / "gma", "tables2_3")
    rows = [r for r in rows if r.get("momentum") in (None, 0.9)]
    by = ["dataset", "skew", "clients", "algorithm", "lr_choice"]
    want = results.paired_difference(rows, by, "aggregation", "GMA", "AVG", "best_global_acc")
    got = plots.gma_tables2_3_leads(rows)
    assert sorted(want) == sorted((*k, c) for k, cs in got.items() for c in cs)
    for (*k, choice), w in want.items():
        c = got[tuple(k)][choice]
        d = [c["GMA"][s] - c["AVG"][s] for s in sorted(set(c["GMA"]) & set(c["AVG"]))]
        assert len(d) == w["n"] and sum(d) / len(d) == pytest.approx(w["mean"], abs=1e-9)
        if w["sd"] is not None:
            assert (sum((x - w["mean"]) ** 2 for x in d) / (len(d) - 1)) ** 0.5 == pytest.approx(w["sd"], abs=1e-9)
        for agg in ("AVG", "GMA"):
            ran = {(float(r["lr"]), float(r["server_lr"])) for r in rows
                   if [r[b] for b in by] == [*k, choice] and r["aggregation"] == agg}
            assert ran == {c["pairs"][agg]}
    # FMNIST-500 FedYogi, read off the CSV by hand (README #gma-selected500): AVG picked 0.05 / 0.01, GMA 0.1 / 0.01
    yogi = got[("fashionmnist", "label", 500, "fedyogi")]["own"]["pairs"]
    assert yogi == {"AVG": (0.05, 0.01), "GMA": (0.1, 0.01)}
