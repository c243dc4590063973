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
