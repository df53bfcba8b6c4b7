"""The measured data the tests read: ``../shared/data`` beside the repository (the product never
needs it; tests that use it are skipped, with the path, where it is absent)."""

from pathlib import Path

import pytest

#: real transmon readout shots (see shared/data/qubit_readout/README)
REAL_SHOTS = Path(__file__).resolve().parents[2] / "shared" / "data" / "qubit_readout" / "transmon_two_state_shots.npy"

needs_real_shots = pytest.mark.skipif(not REAL_SHOTS.is_file(), reason=f"real shots not found at {REAL_SHOTS}")
