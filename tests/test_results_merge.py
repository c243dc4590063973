"""results.write_table(merge=True): a table grows over several commands, and a rerun replaces its own rows."""
from fltutor import results


def _rows(dataset, seeds, value, extra=None):
    return [{"dataset": dataset, "seed": s, **(extra or {}), "metric": "acc", "value": value + s} for s in seeds]


def test_merge_keeps_other_rows_and_replaces_rerun_rows(tmp_path):
    results.write_table(tmp_path, "t", _rows("mnist", [0, 1], 90.0), {"command": "first"}, merge=True)
    results.write_table(tmp_path, "t", _rows("fashionmnist", [0], 80.0), {"command": "second"}, merge=True)
    results.write_table(tmp_path, "t", _rows("mnist", [1], 50.0), {"command": "third"}, merge=True)
    rows, meta = results.read_table(tmp_path, "t")
    got = {(r["dataset"], r["seed"]): r["value"] for r in rows}
    # by hand: mnist seed 0 from the first command, fashionmnist from the second, mnist seed 1 rerun by the third
    assert got == {("mnist", 0): 90.0, ("fashionmnist", 0): 80.0, ("mnist", 1): 51.0}
    assert len(rows) == 3
    assert [p["command"] for p in meta["parts"]] == ["first", "second", "third"]
    assert meta["command"] == "third" and meta["rows"] == 3


def test_merge_takes_the_union_of_columns():
    old = _rows("mnist", [0], 1.0)
    new = _rows("mnist", [0], 2.0, {"mu": 0.2})
    out = results.merge_rows(old, new)
    # a new column makes the rows different runs: the old row stays with mu empty
    assert [list(r) for r in out] == [["dataset", "seed", "mu", "metric", "value"]] * 2
    assert [(r["mu"], r["value"]) for r in out] == [(None, 1.0), (0.2, 2.0)]


def test_without_merge_the_table_is_replaced(tmp_path):
    results.write_table(tmp_path, "t", _rows("mnist", [0, 1], 90.0), {"command": "first"})
    results.write_table(tmp_path, "t", _rows("fashionmnist", [0], 80.0), {"command": "second"})
    rows, meta = results.read_table(tmp_path, "t")
    assert [r["dataset"] for r in rows] == ["fashionmnist"] and "parts" not in meta


# ---- merge_folder / `python -m fltutor merge`: tables made in a worktree or on another machine ----------
def _checkout(tmp_path, name):
    """A results folder that started as a copy of main's: seed 0 of mnist, written by "main"."""
    folder = tmp_path / name / "results" / "paper"
    results.write_table(folder, "t", _rows("mnist", [0], 90.0), {"command": "main", "date": "2026-01-01"}, merge=True)
    return folder


def test_merge_folder_adds_what_a_worktree_ran_and_keeps_provenance(tmp_path):
    main, wt1, wt2 = (_checkout(tmp_path, n) for n in ("main", "wt1", "wt2"))
    results.write_table(wt1, "t", _rows("mnist", [1], 90.0), {"command": "seed 1", "date": "2026-01-02"}, merge=True)
    results.write_table(wt2, "t", _rows("fashionmnist", [0], 80.0), {"command": "fmnist", "date": "2026-01-03"}, merge=True)
    results.write_table(wt2, "u", _rows("mnist", [0], 1.0), {"command": "other table", "date": "2026-01-03"})
    [r1] = results.merge_folder(wt1, main)
    assert (r1["added"], r1["replaced"], r1["new_parts"]) == (1, 0, ["seed 1"])
    reports = {r["table"]: r for r in results.merge_folder(wt2, main)}
    assert reports["t"]["added"] == 1 and reports["u"]["created"]
    rows, meta = results.read_table(main, "t")
    # by hand: main's seed 0, wt1's seed 1, wt2's fashionmnist; the copy of main's row in each worktree counts once
    assert sorted((r["dataset"], r["seed"], r["value"]) for r in rows) == [
        ("fashionmnist", 0, 80.0), ("mnist", 0, 90.0), ("mnist", 1, 91.0)]
    assert [p["command"] for p in meta["parts"]] == ["main", "seed 1", "fmnist"] and meta["command"] == "fmnist"
    assert results.read_table(main, "u")[1]["parts"][0]["command"] == "other table"
    # merging again changes nothing
    assert [(r["added"], r["new_parts"]) for r in results.merge_folder(wt1, main)] == [(0, [])]
    assert results.read_table(main, "t")[0] == rows


def test_merge_folder_stops_on_a_row_with_another_value_unless_told(tmp_path):
    main, wt = _checkout(tmp_path, "main"), _checkout(tmp_path, "wt")
    results.write_table(wt, "t", _rows("mnist", [0], 50.0), {"command": "rerun", "date": "2026-01-05"}, merge=True)
    before = (main / "t.csv").read_text()
    import pytest
    with pytest.raises(ValueError, match=r"1 row\(s\).*dataset=mnist, seed=0, metric=acc: 50.0 here, 90.0 there"):
        results.merge_folder(wt, main)
    assert (main / "t.csv").read_text() == before            # nothing written
    [r] = results.merge_folder(wt, main, replace=True)
    assert (r["added"], r["replaced"]) == (0, 1)
    assert [row["value"] for row in results.read_table(main, "t")[0]] == [50.0]


def test_merge_folder_refuses_rows_without_provenance(tmp_path):
    import pytest
    main, wt = _checkout(tmp_path, "main"), tmp_path / "bare"
    wt.mkdir()
    (wt / "t.csv").write_text("dataset,seed,metric,value\nmnist,3,acc,93.0\n")
    with pytest.raises(ValueError, match="no t.json beside it"):
        results.merge_folder(wt, main)
    results.write_table(wt, "t", _rows("mnist", [3], 90.0), {"command": "main", "date": "2026-01-01"})
    with pytest.raises(ValueError, match="names no command"):   # a command main already lists made other rows
        results.merge_folder(wt, main)


def test_the_cli_merges_a_whole_results_root_and_names_bad_input(tmp_path, capsys):
    import pytest
    from fltutor.__main__ import main as cli
    main, wt = _checkout(tmp_path, "main"), _checkout(tmp_path, "wt")
    results.write_table(wt, "t", _rows("mnist", [2], 90.0), {"command": "seed 2", "date": "2026-01-02"}, merge=True)
    assert cli(["merge", str(wt.parent), "--into", str(main.parent), "--dry-run"]) == 0
    assert "would get 1 new row(s)" in capsys.readouterr().out and len(results.read_table(main, "t")[0]) == 1
    assert cli(["merge", str(wt.parent), "--into", str(main.parent)]) == 0
    out = capsys.readouterr().out
    assert "got 1 new row(s), 0 replaced, 1 new command(s)" in out and "seed 2" in out
    assert len(results.read_table(main, "t")[0]) == 2
    with pytest.raises(SystemExit) as e:
        cli(["merge", str(tmp_path / "nowhere"), "--into", str(main.parent)])
    assert e.value.code == 2 and "is not a folder" in capsys.readouterr().err
    # a scratch folder named for no paper would have started a stray results/<name>: refused, nothing written
    scratch = tmp_path / "scratch" / "m1"
    results.write_table(scratch, "t", _rows("mnist", [3], 90.0), {"command": "seed 3", "date": "2026-01-03"})
    with pytest.raises(SystemExit) as e:
        cli(["merge", str(scratch), "--into", str(main.parent)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "'m1' names no paper" in err and "waffle_weighted" in err
    assert not (main.parent / "m1").exists()


def test_merge_of_chosen_tables_leaves_the_others_and_names_an_absent_one(tmp_path, capsys):
    """A worktree whose other table is older than main's (here: a value that would conflict) merges only what it ran."""
    import pytest
    from fltutor.__main__ import main as cli
    main, wt = _checkout(tmp_path, "main"), _checkout(tmp_path, "wt")
    results.write_table(main, "u", _rows("mnist", [0], 5.0), {"command": "main's u"})
    results.write_table(wt, "u", _rows("mnist", [0], 4.0), {"command": "stale u"})
    results.write_table(wt, "t", _rows("mnist", [3], 90.0), {"command": "seed 3", "date": "2026-01-02"}, merge=True)
    with pytest.raises(ValueError, match="another value"):
        results.merge_folder(wt, main)
    [r] = results.merge_folder(wt, main, tables=["t"])
    assert (r["table"], r["added"]) == ("t", 1)
    assert results.read_table(main, "u")[0][0]["value"] == 5.0
    with pytest.raises(SystemExit) as e:
        cli(["merge", str(wt), "--into", str(main.parent), "--tables", "t", "v"])
    assert e.value.code == 2 and "tables=['v'] not in" in capsys.readouterr().err
