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


def pytest_configure(config):
    """Refuse to test an onchip other than this checkout's: a `pytest` from another environment
    (a venv that reuses the system's pytest, an old install) would import that onchip and pass
    or fail on code that is not the one under test."""
    import importlib.util
    from pathlib import Path

    import pytest

    found = importlib.util.find_spec("onchip")
    checkout = Path(__file__).resolve().parents[1] / "python" / "onchip"
    where = Path(found.origin).resolve().parent if found and found.origin else None
    if where != checkout:
        raise pytest.UsageError(f"these tests are {checkout.parent.parent}'s, but this Python imports onchip from "
                                f"{where or 'nowhere'}: run `pip install -e \".[dev]\"` in the checkout, then "
                                f"`python -m pytest` with that environment's Python")


#: the first check (``python -m pytest -m quick``, a few minutes on 2 cores): unit tests of the spec, the
#: fixed point, the golden model, the tasks, the output folders and the command line, none of which
#: builds Verilator, runs a solver or a seed method. The full default run stays the test command.
QUICK = frozenset({
    "test_args.py", "test_cli_help.py", "test_docs_site.py", "test_drift.py", "test_fixed.py", "test_golden.py",
    "test_io.py", "test_progress.py", "test_spec.py", "test_tasks.py", "test_timing_report.py",
    "test_readme_figures.py",
})


def pytest_collection_modifyitems(config, items):
    import pytest

    for item in items:
        if item.path.name in QUICK:
            item.add_marker(pytest.mark.quick)
