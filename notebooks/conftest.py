"""For ``pytest --nbval-lax notebooks/``: run the notebooks headless (see fltutor.plots.interact)."""
import os

os.environ.setdefault("FLTUTOR_HEADLESS", "1")
