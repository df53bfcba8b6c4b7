"""Keep every cache and config a run writes inside the run's own temp folder."""

import atexit
import os
import shutil
import tempfile

_run_home = tempfile.mkdtemp(prefix="onchip-test-")
atexit.register(shutil.rmtree, _run_home, ignore_errors=True)
for _var in ("MPLCONFIGDIR", "XDG_CACHE_HOME", "NUMBA_CACHE_DIR"):
    os.environ.setdefault(_var, os.path.join(_run_home, _var.lower()))
os.environ.setdefault("MPLBACKEND", "Agg")
# QKeras 0.9 runs on tf-keras: TensorFlow must see this before any test file imports it
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
