"""pytest, for the whole checkout: one CPU thread per notebook kernel when pytest-xdist runs several workers.

Each worker runs its own notebook kernel (nbval), and torch's default is a thread per core. Two such kernels on
2 cores oversubscribe them, and OpenMP's waiting threads spin: measured on this project's 2-core machine with
another single-thread job holding a core, `python -m fltutor run 05 --fresh` took 349 s with 2 threads and 80 s
with 1. Kernels inherit this process's environment, so the setting is made here, before any kernel starts;
an OMP_NUM_THREADS you set yourself is kept. (tests/conftest.py does the same for the tests' own process.)
"""
import os

if os.environ.get("PYTEST_XDIST_WORKER") and "OMP_NUM_THREADS" not in os.environ:
    os.environ["OMP_NUM_THREADS"] = "1"
