"""Keep every cache and config a run writes inside the run's own temp folder."""

import os
import tempfile

_run_home = tempfile.mkdtemp(prefix="onchip-test-")
for _var in ("MPLCONFIGDIR", "XDG_CACHE_HOME", "NUMBA_CACHE_DIR"):
    os.environ.setdefault(_var, os.path.join(_run_home, _var.lower()))
os.environ.setdefault("MPLBACKEND", "Agg")
