"""The measured data the tests read: the real transmon shots shipped under ``tests/data``
(the product never needs them). ``ONCHIP_REAL_SHOTS`` may point to another file of the same
layout, (states, shots, 2)."""

import os
from pathlib import Path

#: real transmon readout shots (see tests/data/qubit_readout/README.md)
REAL_SHOTS = Path(os.environ.get("ONCHIP_REAL_SHOTS")
                  or Path(__file__).resolve().parent / "data" / "qubit_readout" / "transmon_two_state_shots.npy")
