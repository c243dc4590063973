"""scripts/gma_quick_seeds.py: its lead summary against a hand computation, and its refusals before any run."""
import math

import pytest


@pytest.fixture
def qs(load_script):
    return load_script("gma_quick_seeds")


def _rows(src, g, values, metric="best_global_acc"):
    """values: {seed: (AVG, GMA)}; None leaves that aggregation out."""
    out = []
    for seed, pair in values.items():
        for agg, v in zip(("AVG", "GMA"), pair):
            if v is not None:
                out.append({"data_source": src, "server_lr": g, "seed": seed, "aggregation": agg, "metric": metric,
                            "value": v})
    return out


def test_lead_summary_matches_a_hand_computation(qs):
    rows = (_rows("bundled", 1.0, {0: (50.0, 52.0), 1: (60.0, 56.0), 2: (40.0, 42.0), 3: (45.0, None)})
            + _rows("bundled", 1.0, {0: (1.0, 99.0)}, metric="last10_global_acc")       # another metric: ignored
            + _rows("torchvision", 2.0, {0: (30.0, 31.5), 1: (35.0, 35.5)}))
    got = {(s["data_source"], s["server_lr"]): s for s in qs.lead_summary(rows)}
    b = got["bundled", 1.0]
    # GMA - AVG = +2, -4, +2 (seed 3 has no GMA run): mean 0, sd sqrt((4 + 16 + 4) / 2)
    assert b["seeds"] == [0, 1, 2] and b["ahead"] == 2
    assert b["mean"] == pytest.approx(0.0) and b["sd"] == pytest.approx(math.sqrt(12))
    # seed pairs: (+2, -4) -> -1, (+2, +2) -> +2, (-4, +2) -> -1: two of three would show AVG ahead
    assert b["pairs_not_ahead"] == pytest.approx(2 / 3)
    t = got["torchvision", 2.0]
    assert t["diffs"] == {0: 1.5, 1: 0.5} and t["ahead"] == 2 and t["pairs_not_ahead"] == 0


def test_bad_arguments_stop_before_any_run(qs, tmp_path, monkeypatch):
    monkeypatch.setattr(qs.subprocess, "run", lambda *a, **k: pytest.fail("a run started"))
    with pytest.raises(ValueError, match="--seeds"):
        qs.main(["--seeds", "1", "--folder", str(tmp_path)])
    with pytest.raises(SystemExit, match="--sources.*allowed"):
        qs.main(["--sources", "cifar", "--folder", str(tmp_path)])
    with pytest.raises(SystemExit, match="--data-root"):
        qs.main(["--sources", "torchvision", "--data-root", str(tmp_path), "--folder", str(tmp_path)])
