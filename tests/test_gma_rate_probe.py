"""scripts/gma_rate_probe.py: its [0, 1] inputs against the raw bytes, and its rows on a tiny run with a divergence."""
import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch

from fltutor import data as fdata
from fltutor.scenarios import gma_data

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def probe(load_script):
    return load_script("gma_rate_probe")


@pytest.fixture
def small(monkeypatch):
    """The first 300 training and 200 test images of the bundled FMNIST subset (FLTUTOR_DATA unset)."""
    monkeypatch.delenv("FLTUTOR_DATA", raising=False)
    with pytest.warns(UserWarning):
        tr, te = fdata.load("fashionmnist", train=True), fdata.load("fashionmnist", train=False)
    n_train, n_test = 300, 200
    return dataclasses.replace(tr, x=tr.x[:n_train], y=tr.y[:n_train]), dataclasses.replace(te, x=te.x[:n_test], y=te.y[:n_test])


def test_unit_inputs_are_the_raw_pixels_over_255(probe, small):
    tr, te = small
    fed = gma_data("fashionmnist", "label", 10, seed=0, train_set=tr, test_set=te)
    unit = probe.unit_inputs(fed, "fashionmnist")
    raw = np.load(ROOT / "data" / "bundled" / "fashionmnist.npz")            # what ToTensor() reads: uint8 / 255
    want_test = torch.from_numpy(raw["x_test"][:200].astype(np.float32) / 255).unsqueeze(1)
    torch.testing.assert_close(unit.x_test, want_test, atol=1e-6, rtol=0)
    assert float(unit.x.min()) >= -1e-6 and float(unit.x.max()) <= 1 + 1e-6
    assert unit.train == fed.train and torch.equal(unit.y, fed.y) and unit.fingerprint != fed.fingerprint


def test_rows_of_a_tiny_probe_with_one_diverging_rate(probe, small, tmp_path):
    tr, te = small
    fed = gma_data("fashionmnist", "label", 10, seed=0, train_set=tr, test_set=te)
    datas = {("standardized", 0): fed, ("unit", 0): probe.unit_inputs(fed, "fashionmnist")}
    said = []
    rows = probe.probe(datas, dataset="fashionmnist", clients=10, lrs=[0.01, 1e30], momenta=[0.9], batch_sizes=[16],
                       seeds=[0], rounds=2, out_root=tmp_path, say=said.append)
    got = {(r["inputs"], r["lr"], r["metric"]): r["value"] for r in rows}
    assert len(rows) == 2 * 2 * 3 and len(said) == 4
    for inputs in ("standardized", "unit"):
        assert got[inputs, 1e30, "diverged_round"] == 1                       # a rate of 1e30 overflows in round 1
        assert got[inputs, 1e30, "best_global_acc"] is None and got[inputs, 1e30, "final_global_acc"] is None
        assert got[inputs, 0.01, "diverged_round"] is None
        assert 0 <= got[inputs, 0.01, "final_global_acc"] <= got[inputs, 0.01, "best_global_acc"] <= 100
    assert any("diverged at round 1" in s for s in said)
    # the healthy cell trained alone, without the diverging one beside it: the script's row holds its numbers
    from fltutor.federation import sweep
    from fltutor.scenarios import gma_model
    unit = datas["unit", 0]
    alone = sweep(gma_model("fashionmnist", unit), [unit], "fedopt", [{"seed": 0, "lr": 0.01, "momentum": 0.9}],
                  progress=False, server_opt="sgd", server_lr=1.0, aggregation="mean", tau=0.4, mu=0.0, local_epochs=1,
                  batch_size=16, client_fraction=1.0, rounds=2, eval_every=1)[0]
    accs = [e["global_acc"] for e in alone["history"] if e.get("global_acc") is not None]
    # float32: a batched run agrees to rounding, which may flip one of the 200 test images (0.5 points)
    assert got["unit", 0.01, "best_global_acc"] == pytest.approx(max(accs), abs=0.51)
    assert got["unit", 0.01, "final_global_acc"] == pytest.approx(accs[-1], abs=0.51)


def test_gma_table_prints_the_probe_by_hand(tmp_path, capsys, monkeypatch):
    from fltutor import results
    from test_results import run_script

    def rows(inputs, lr, seed, best, final, stop):
        ids = {"dataset": "fashionmnist", "skew": "label", "clients": 10, "algorithm": "fedavg", "aggregation": "AVG",
               "inputs": inputs, "batch_size": 32, "lr": lr, "momentum": 0.9, "server_lr": 1.0, "seed": seed,
               "rounds": 10, "eval_every": 1}
        return [{**ids, "metric": m, "value": v} for m, v in
                (("best_global_acc", best), ("final_global_acc", final), ("diverged_round", stop))]
    table = (rows("unit", 0.05, 0, 41.2, 10.0, None) + rows("unit", 0.05, 1, 43.2, 12.0, None)
             + rows("standardized", 0.1, 0, None, None, 3) + rows("standardized", 0.1, 1, 70.0, 69.0, None))
    results.write_table(tmp_path, "rate_probe", table, results.provenance(command="probe", scale="full data"))
    run_script(monkeypatch, "gma_table", tmp_path)
    out = capsys.readouterr().out
    # by hand: best 41.2 and 43.2 -> 42.20 ± 1.41, final 10 and 12 -> 11.00 ± 1.41; one of two seeds diverged at round 3
    assert "| FMNIST, 2-class, 10 clients | unit | 32 | 0.05 | 0.9 | 1 | 10 | 2 | 42.20 ± 1.41 | 11.00 ± 1.41 | – |" in out
    assert "| FMNIST, 2-class, 10 clients | standardized | 32 | 0.1 | 0.9 | 1 | 10 | 2 | 70.00 | 69.00 | 1 of 2, round 3 |" in out
