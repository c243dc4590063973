"""A run that diverges says so: it stops, records where, and never reports an accuracy."""
import json
import math
import warnings

import pytest
import torch

from fltutor import data, partition
from fltutor.federation import Federation, grid, run

KW = dict(rounds=4, client_fraction=0.5, local_epochs=1, batch_size=16, seed=0)
KINDS = [("fedavg", {}), ("fedopt", {"aggregation": "gma"}), ("fedadam", {"server_lr": 0.1}),
         ("scaffold", {}), ("waffle_ibp", {"selection_optimizer": "adam", "selection_lr": 0.1}),
         ("fedper", {}), ("pfedme", {})]


@pytest.fixture(scope="module")
def fed():
    tr, te = data.standin("mnist", 240, seed=0), data.standin("mnist", 60, train=False, seed=0)
    return data.make_federated(tr, partition.iid(tr.y.numpy(), 6, seed=0), test_fraction=0.2, seed=0, test_set=te)


@pytest.mark.parametrize("method,extra", KINDS)
def test_a_diverging_run_is_flagged_with_its_round_and_client(fed, method, extra):
    # float32 overflows within a round at this rate; a merely huge but finite loss is not flagged
    fl = Federation("mlp", fed, method, device="cpu", progress=False, lr=1e30, **KW, **extra)
    with pytest.warns(RuntimeWarning, match="diverged at round"):
        fl.run()
    d = fl.diverged[0]
    assert d is not None and 1 <= d["round"] <= KW["rounds"], "lr = 1e30 must overflow within four rounds"
    assert d["where"] in ("local training", "server step")
    if d["where"] == "local training":
        assert d["client"] in fl.history[-1]["clients"]
    res = fl.results()[0]
    assert res["diverged"] == d and res["final"]["local_acc"] is None and res["final"]["global_acc"] is None
    assert fl.history[-1]["diverged"] == d and "local_acc" not in fl.history[-1]
    assert fl.round == d["round"], "a single diverged run stops"


def test_in_a_sweep_only_the_diverging_run_stops(fed):
    runs = [{"lr": 0.05}, {"lr": 1e200}]   # float64: only an absurd rate overflows within four rounds
    sw = Federation("mlp", fed, "fedavg", runs=runs, device="cpu", dtype=torch.float64, progress=False, **KW)
    with pytest.warns(RuntimeWarning, match="run 1 .*diverged"):
        sw.run()
    assert sw.diverged[0] is None and sw.diverged[1] is not None and sw.round == KW["rounds"]
    alone = Federation("mlp", fed, "fedavg", device="cpu", dtype=torch.float64, progress=False, lr=0.05, **KW)
    alone.run()
    for k, v in alone.global_params.items():
        assert torch.equal(sw.global_params[k][0], v[0]), "the healthy run must equal its run alone"
    assert sw.results()[0]["final"]["local_acc"] == alone.results()[0]["final"]["local_acc"]
    assert len(sw.histories[1]) == sw.diverged[1]["round"]


def test_a_diverged_cell_is_stored_as_strict_json_and_reloads(fed, tmp_path, monkeypatch):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        res = run("mlp", fed, "fedavg", out_root=tmp_path, device="cpu", progress=False, lr=1e30, **KW)
    assert res["diverged"] is not None
    text = next(tmp_path.glob("cells/*/results.json")).read_text()
    assert "NaN" not in text and "Infinity" not in text
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-strict JSON token {c}"))
    monkeypatch.setattr(Federation, "run_round", lambda self: pytest.fail("a diverged cell should reload"))
    again = run("mlp", fed, "fedavg", out_root=tmp_path, device="cpu", progress=False, lr=1e30, **KW)
    assert again["diverged"] == res["diverged"]
    assert all(h.get("train_loss") is None or math.isfinite(h["train_loss"]) for h in again["history"])
