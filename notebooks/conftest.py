"""For ``pytest`` (the pyproject's addopts run ``--nbval-lax`` over notebooks/): every notebook runs headless
with its quick defaults on the bundled data, and its closing self-check cell (fltutor.results.
check_notebook_results) also asserts what holds only there, because FLTUTOR_SELFCHECK is set.

The variables are set only while a notebook's cells run (its kernel starts then and inherits them), so
the tests under tests/ see the environment as it was."""
import os

import pytest

NOTEBOOK_ENV = {"FLTUTOR_HEADLESS": "1", "FLTUTOR_DATA": "bundled", "FLTUTOR_SELFCHECK": "1"}
_saved = {}


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    for k, v in NOTEBOOK_ENV.items():
        _saved.setdefault(k, os.environ.get(k))
        os.environ[k] = v


def pytest_runtest_teardown(item, nextitem):
    if nextitem is None or not str(nextitem.fspath).startswith(os.path.dirname(__file__)):
        for k, v in _saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        _saved.clear()
