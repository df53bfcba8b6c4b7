"""The "Integrate it" page's three-learner block runs as the page writes it: three learners (one
imported from pykan) in one Verilator build with random stalls. Apart from test_docs_integrate.py,
whose other shell blocks it does not need, so that the two run side by side on two test workers."""

from __future__ import annotations

import subprocess

from test_docs_integrate import PAGE, THREE


def test_three_learners_build_and_match_their_golden_models(tmp_path):
    (block,) = THREE
    (tmp_path / "examples").symlink_to(PAGE.parents[1] / "examples")  # the page's paths are the repository's
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=tmp_path, capture_output=True, text=True)
    # the example exits 1 unless each learner matches its golden model and frames its predictions with TLAST
    assert proc.returncode == 0, block + proc.stdout[-3000:] + proc.stderr[-3000:]
    three = tmp_path / "three"
    assert {p.name for p in three.glob("*_m.txt")} == {"readout_kan_m.txt", "readout_mlp_m.txt", "imported_kan_m.txt"}
    # a build large enough to use the precompiled header (the PCH make variable of the page's command)
    assert (three / "obj" / "Vsystem__pch.h.fast.gch").is_file()
