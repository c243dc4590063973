"""A run killed at any moment (mid-round, or in the middle of writing its checkpoint) resumes to
exactly the numbers of a run that was never interrupted.

The run lives in a subprocess that gets SIGKILL: at a random time, or from inside the checkpoint
writer after its k-th fsync, with the file being written cut to half its length first (a torn
write). Then the run is resumed here and compared, tensor for tensor, with an uninterrupted one.
"""
import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import torch

from fltutor.checkpoint import MANIFEST, read_checkpoint

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX signals")

SETUP = textwrap.dedent("""
    import torch
    from fltutor import data, partition
    from fltutor.federation import Federation, grid

    def make(out_dir=None):
        tr = data.standin("mnist", 240, seed=0)
        fed = data.make_federated(tr, partition.iid(tr.y.numpy(), 6, seed=0), test_fraction=0.2, seed=0)
        return Federation("mlp", fed, "waffle_ibp", runs=grid(seed=[0, 1], kl_weight=[1.0]), out_dir=out_dir,
                          checkpoint_every=1, device="cpu", dtype=torch.float64, progress=False, rounds=8,
                          client_fraction=0.5, local_epochs=1, batch_size=16, lr=0.05, num_factors=8)
""")

CHILD = SETUP + textwrap.dedent("""
    import os, signal, stat, sys
    out_dir, kill_at = sys.argv[1], int(sys.argv[2])
    if kill_at > 0:                      # die inside the checkpoint writer, after a torn write
        real, count = os.fsync, [0]
        def fsync(fd):
            count[0] += 1
            if count[0] == kill_at:
                st = os.fstat(fd)
                if stat.S_ISREG(st.st_mode) and st.st_size > 1:
                    os.ftruncate(fd, st.st_size // 2)
                os.kill(os.getpid(), signal.SIGKILL)
            real(fd)
        os.fsync = fsync
    fed = make(out_dir)
    print("start", fed.round, flush=True)
    fed.run()
    print("done", flush=True)
""")


@pytest.fixture(scope="module")
def child(tmp_path_factory):
    d = tmp_path_factory.mktemp("fault")
    (d / "setup_run.py").write_text(SETUP)
    (d / "child.py").write_text(CHILD)
    return d


@pytest.fixture(scope="module")
def uninterrupted(child):
    sys.path.insert(0, str(child))
    try:
        import setup_run
        fed = setup_run.make()
    finally:
        sys.path.remove(str(child))
    fed.run()
    return fed, setup_run.make


def _start(child, out_dir, kill_at=0):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, str(child / "child.py"), str(out_dir), str(kill_at)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _assert_equal(resumed, full):
    assert resumed.round == full.round
    for k in full.global_params:
        assert torch.equal(resumed.global_params[k], full.global_params[k]), k
    for k in full.private:
        assert torch.equal(resumed.private[k], full.private[k]), k
    assert torch.equal(resumed.seen, full.seen)
    assert resumed.histories == full.histories


def test_killed_inside_the_checkpoint_writer_resumes_equal(child, uninterrupted, tmp_path):
    full, make = uninterrupted
    # one checkpoint of this run makes 16 fsyncs: server.pt, log.pt, 6 client files, 2 folders, the
    # manifest and its folder, 2 results files and their folder. A process killed at fsync k dies in
    # round 1's client file 0 (3), its manifest (11); round 2's client file 5 (24), just after the
    # manifest's commit (28), in a results file (29)
    for kill_at in (3, 11, 24, 28, 29):
        p = _start(child, tmp_path, kill_at)
        _, err = p.communicate(timeout=120)
        assert p.returncode == -signal.SIGKILL, err
    assert list(tmp_path.glob("*.tmp")), "the kills left torn temporary files behind"
    resumed = make(tmp_path)
    assert 0 < resumed.round < full.config.rounds, "the kills left a committed, partial run"
    resumed.run()
    assert not list(tmp_path.glob("*.tmp")) and len(list(tmp_path.glob("round-*"))) == 1
    _assert_equal(resumed, full)
    assert read_checkpoint(tmp_path, resumed.run_key)["round"] == full.config.rounds


def test_killed_at_random_moments_resumes_equal(child, uninterrupted, tmp_path):
    full, make = uninterrupted
    rng = random.Random(0)
    for _ in range(3):
        p = _start(child, tmp_path)
        line = p.stdout.readline()                     # "start <round>": torch is imported, training begins
        if not line.startswith("start"):
            p.wait(timeout=60)
            break
        time.sleep(rng.uniform(0.0, 0.6))
        p.send_signal(signal.SIGKILL)
        p.communicate(timeout=60)
    resumed = make(tmp_path)
    resumed.run()
    _assert_equal(resumed, full)
    assert (tmp_path / MANIFEST).exists()
