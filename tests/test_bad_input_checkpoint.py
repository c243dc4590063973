"""Checkpoints that cannot be trusted are refused with an error that names the file and the fix;
one process at a time writes a run folder; what a killed write leaves is cleaned up."""
import json
import os

import pytest
import torch

from fltutor import data, federation, partition
from fltutor.checkpoint import MANIFEST, CheckpointError, RunLock, atomic_write_json, clean_stray, read_checkpoint
from fltutor.federation import Federation

KW = dict(rounds=3, client_fraction=0.5, local_epochs=1, batch_size=16, lr=0.05, device="cpu",
          dtype=torch.float64, progress=False)


@pytest.fixture(scope="module")
def fed():
    tr = data.standin("mnist", 160, seed=0)
    return data.make_federated(tr, partition.iid(tr.y.numpy(), 4, seed=0), test_fraction=0.25, seed=0)


@pytest.fixture
def done(fed, tmp_path):
    """A finished run in tmp_path, with private state (SCAFFOLD's client controls)."""
    f = Federation("mlp", fed, "scaffold", out_dir=tmp_path, **KW)
    f.run()
    return f


def _folder(out_dir):
    return out_dir / json.loads((out_dir / MANIFEST).read_text())["folder"]


def _truncate(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _flip_bit(path):
    blob = bytearray(path.read_bytes())
    blob[len(blob) // 2] ^= 0x10
    path.write_bytes(bytes(blob))


DAMAGE = [
    # (what is done to the run folder, the file the error must name, words it must hold)
    ("truncate server", lambda d: _truncate(_folder(d) / "server.pt"), "server.pt", "truncated"),
    ("flip a bit in a client", lambda d: _flip_bit(_folder(d) / "clients" / "00002.pt"), "00002.pt", "SHA-256"),
    ("flip a bit in the log", lambda d: _flip_bit(_folder(d) / "log.pt"), "log.pt", "SHA-256"),
    ("delete a client file", lambda d: (_folder(d) / "clients" / "00001.pt").unlink(), "00001.pt", "cannot be read"),
    ("garbage manifest", lambda d: (d / MANIFEST).write_text("{not json"), MANIFEST, "damaged"),
    ("manifest without its folder", lambda d: (d / MANIFEST).write_text(json.dumps({"round": 3})), MANIFEST, "damaged"),
    ("old layout", lambda d: ((d / MANIFEST).unlink(), (d / "server.pt").write_bytes(b"x")), "server.pt", "older fltutor"),
]


@pytest.mark.parametrize("what,damage,file,words", DAMAGE, ids=[d[0] for d in DAMAGE])
def test_a_damaged_checkpoint_is_refused_naming_the_file_and_the_fix(fed, tmp_path, done, what, damage, file, words):
    damage(tmp_path)
    with pytest.raises(CheckpointError) as err:
        Federation("mlp", fed, "scaffold", out_dir=tmp_path, **KW)
    msg = str(err.value)
    assert file in msg and words in msg and "fresh=True" in msg and str(tmp_path) in msg, msg


def test_fresh_starts_over_and_equals_an_uninterrupted_run(fed, tmp_path, done):
    _flip_bit(_folder(tmp_path) / "server.pt")
    again = Federation("mlp", fed, "scaffold", out_dir=tmp_path, fresh=True, **KW)
    assert again.round == 0
    again.run()
    for k in done.global_params:
        assert torch.equal(again.global_params[k], done.global_params[k])
    assert again.histories == done.histories


@pytest.mark.parametrize("change", [{"lr": 0.02}, {"eval_every": 2}, {"rounds": 4}, {"seed": 1}])
def test_a_checkpoint_of_another_run_is_refused(fed, tmp_path, done, change):
    with pytest.raises(CheckpointError, match="different run"):
        Federation("mlp", fed, "scaffold", out_dir=tmp_path, **{**KW, **change})


def test_a_second_writer_is_refused_naming_the_holder(fed, tmp_path):
    with RunLock(tmp_path):
        f = Federation("mlp", fed, "fedavg", out_dir=tmp_path, **KW)
        with pytest.raises(CheckpointError, match=rf"in use by process {os.getpid()} on .* since"):
            f.run()
    f.run()                                    # the lock is gone with its holder
    assert read_checkpoint(tmp_path, f.run_key)["round"] == KW["rounds"]


def test_what_a_killed_write_leaves_is_removed_at_the_next_start(fed, tmp_path, done):
    stray = [tmp_path / "checkpoint.json.abc.tmp", tmp_path / "results.json.x1.tmp"]
    for p in stray:
        p.write_bytes(b"half")
    (tmp_path / "round-000007" / "clients").mkdir(parents=True)  # an uncommitted round
    keep = _folder(tmp_path)
    f = Federation("mlp", fed, "scaffold", out_dir=tmp_path, **{**KW, "rounds": 3})
    f.run()                                    # nothing to train; the start cleans up
    assert not any(p.exists() for p in stray) and not (tmp_path / "round-000007").exists() and keep.exists()
    assert clean_stray(tmp_path) == []


def test_a_damaged_results_file_of_a_cached_cell_is_named(fed, tmp_path):
    federation.run("mlp", fed, "fedavg", out_root=tmp_path, **KW)
    res = next(tmp_path.glob("cells/*/results.json"))
    res.write_text(res.read_text()[:50])
    with pytest.raises(CheckpointError, match="results.json is damaged"):
        federation.run("mlp", fed, "fedavg", out_root=tmp_path, **KW)
    again = federation.run("mlp", fed, "fedavg", out_root=tmp_path, fresh=True, **KW)
    assert again["rounds_done"] == KW["rounds"]


def test_results_are_strict_json(tmp_path):
    atomic_write_json(tmp_path / "r.json", {"a": float("nan"), "b": [float("inf"), 1.5]})
    assert json.loads((tmp_path / "r.json").read_text()) == {"a": None, "b": [None, 1.5]}
    assert not list(tmp_path.glob("*.tmp"))
