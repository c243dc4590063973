"""results/ tables: tidy CSV + provenance JSON, read back equal, summarized as by hand."""
import json
import statistics

import pytest

from fltutor import results


def _rows():
    return [{"dataset": "mnist", "method": m, "seed": s, "metric": "auc", "value": v}
            for m, vals in (("fedavg", [0.61, 0.65, 0.58]), ("waffle_ibp", [0.52, 0.50, None]))
            for s, v in enumerate(vals)]


def test_write_then_read_gives_the_rows_and_the_provenance(tmp_path):
    meta = results.provenance(command="python -m fltutor run 05", wall_s=12.345, seeds=3)
    csv_path, json_path = results.write_table(tmp_path / "waffle_ibp", "table3", _rows(), meta)
    rows, got = results.read_table(tmp_path / "waffle_ibp", "table3")
    assert rows == _rows()
    assert got["command"] == "python -m fltutor run 05" and got["wall_s"] == 12.3 and got["seeds"] == 3
    assert got["rows"] == 6 and got["columns"] == ["dataset", "method", "seed", "metric", "value"]
    for key in ("fltutor_version", "commit", "device", "date"):
        assert got[key]
    assert sorted(p.name for p in (tmp_path / "waffle_ibp").iterdir()) == ["table3.csv", "table3.json"]  # no temp files
    assert json.loads(json_path.read_text())["table"] == "table3.csv"
    assert csv_path.read_text().splitlines()[0] == "dataset,method,seed,metric,value"


def test_summarize_matches_the_statistics_module():
    s = results.summarize(_rows(), by=("method",), metric="auc")
    assert s[("fedavg",)]["mean"] == pytest.approx(statistics.mean([0.61, 0.65, 0.58]))
    assert s[("fedavg",)]["sd"] == pytest.approx(statistics.stdev([0.61, 0.65, 0.58]))
    assert s[("waffle_ibp",)] == {"mean": pytest.approx(0.51), "sd": pytest.approx(statistics.stdev([0.52, 0.50])), "n": 2}
    assert results.summarize(_rows(), by=("method",), metric="accuracy") == {}


def test_a_missing_table_reads_as_none(tmp_path):
    assert results.read_table(tmp_path, "nothing") is None


@pytest.mark.parametrize("rows, match", [([], "at least one row"),
                                         ([{"method": "fedavg", "value": 1.0}], "'metric' column"),
                                         ([{"metric": "a", "value": 1}, {"value": 1, "metric": "a"}], "row 1")])
def test_bad_rows_are_refused_before_anything_is_written(tmp_path, rows, match):
    with pytest.raises(ValueError, match=match):
        results.write_table(tmp_path, "t", rows, {})
    assert not any(tmp_path.iterdir())


def test_every_committed_table_says_how_it_was_made():
    """Each results/<paper>/<table>.csv has its JSON beside it, and the JSON counts the rows it describes."""
    tables = sorted(results.RESULTS_DIR.glob("*/*.csv"))
    for path in tables:
        rows, meta = results.read_table(path.parent, path.stem)
        for key in ("command", "fltutor_version", "commit", "device", "date", "wall_s"):
            assert meta.get(key) not in (None, ""), f"{path}: the JSON lacks {key}"
        assert meta["rows"] == len(rows) and meta["columns"] == list(rows[0]), path
        assert all(r["value"] is None or isinstance(r["value"], (int, float)) for r in rows), path
