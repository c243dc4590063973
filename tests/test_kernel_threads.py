"""The checkout's conftest.py gives notebook kernels one thread each when pytest-xdist runs several workers."""
import os

import pytest


@pytest.mark.skipif(not os.environ.get("PYTEST_XDIST_WORKER"), reason="only under pytest-xdist workers")
def test_kernels_started_by_an_xdist_worker_inherit_a_thread_count():
    # kernels inherit this environment; without a count torch takes one thread per core in every kernel
    assert os.environ.get("OMP_NUM_THREADS")


def test_the_conftest_keeps_a_count_the_user_set(monkeypatch):
    import importlib.util
    from pathlib import Path
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    spec = importlib.util.spec_from_file_location("root_conftest", Path(__file__).parents[1] / "conftest.py")
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    assert os.environ["OMP_NUM_THREADS"] == "3"
    monkeypatch.delenv("OMP_NUM_THREADS")
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    assert os.environ["OMP_NUM_THREADS"] == "1"
