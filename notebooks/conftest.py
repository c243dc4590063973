"""For ``pytest`` (the pyproject's addopts run ``--nbval-lax`` over notebooks/): every notebook runs headless
with its quick defaults on the bundled data, and its closing self-check cell (fltutor.results.
check_notebook_results) also asserts what holds only there, because FLTUTOR_SELFCHECK is set.

The variables are set only while a notebook's cells run (its kernel starts then and inherits them), so
the tests under tests/ see the environment as it was. At the end pytest prints each notebook's time (the
sum of its cells' setup, call and teardown, kernel start included): the README's cost table quotes these.
The times are summed from the test reports, which reach the main process also under pytest-xdist."""
import os

import pytest

NOTEBOOK_ENV = {"FLTUTOR_HEADLESS": "1", "FLTUTOR_DATA": "bundled", "FLTUTOR_SELFCHECK": "1"}
if os.environ.get("PYTEST_XDIST_WORKER"):   # pytest -n: kernels share the cores with another worker, one thread each
    NOTEBOOK_ENV["OMP_NUM_THREADS"] = "1"
HERE = os.path.dirname(os.path.abspath(__file__))
_saved = {}
_times: dict[str, float] = {}   # notebook -> seconds, summed over its cells' reports


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    for k, v in NOTEBOOK_ENV.items():
        _saved.setdefault(k, os.environ.get(k))
        os.environ[k] = v


def pytest_runtest_teardown(item, nextitem):
    if nextitem is None or not str(nextitem.fspath).startswith(HERE):
        for k, v in _saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        _saved.clear()


def pytest_runtest_logreport(report):
    path = report.nodeid.split("::")[0]
    if path.endswith(".ipynb"):
        nb = os.path.basename(path)
        _times[nb] = _times.get(nb, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter):
    if _times:
        terminalreporter.write_sep("-", "notebook times (quick defaults, bundled data)")
        for nb, t in sorted(_times.items()):
            terminalreporter.write_line(f"{nb:52s} {t:7.1f} s")
