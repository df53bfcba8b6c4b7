"""The kernels' numba cache folder follows every source file the kernels are compiled from."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numba

from onchip import jitcache


def _copy_package(tmp_path):
    pkg = tmp_path / "onchip"
    (pkg / "model").mkdir(parents=True)
    for src in jitcache.kernel_sources():
        shutil.copy(src, pkg / src.relative_to(jitcache._PACKAGE))
    return pkg


def test_an_edit_of_fixed_or_a_model_file_selects_a_new_folder(tmp_path):
    pkg = _copy_package(tmp_path)
    cache = tmp_path / "cache"
    before = jitcache.kernel_cache_dir(pkg, cache)
    assert before == jitcache.kernel_cache_dir(pkg, cache)
    assert before.parent == cache and before.name.startswith("numba-")
    with open(pkg / "fixed.py", "a") as f:
        f.write("\n# changed arithmetic\n")
    after_fixed = jitcache.kernel_cache_dir(pkg, cache)
    assert after_fixed != before
    with open(pkg / "model" / "kernels.py", "a") as f:
        f.write("\n")
    assert jitcache.kernel_cache_dir(pkg, cache) not in (before, after_fixed)


def test_configure_puts_the_hashed_folder_under_numba_cache_dir_when_it_is_set(monkeypatch, tmp_path):
    monkeypatch.setattr(numba.config, "CACHE_DIR", "sentinel")
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "n"))
    jitcache.configure()
    assert numba.config.CACHE_DIR == str(jitcache.kernel_cache_dir(cache=tmp_path / "n"))
    assert Path(numba.config.CACHE_DIR).parent == tmp_path / "n"
    jitcache.configure()  # idempotent: no folder inside the folder
    assert Path(numba.config.CACHE_DIR).parent == tmp_path / "n"
    assert jitcache.specialised_dir() == Path(numba.config.CACHE_DIR) / "specialised"
    monkeypatch.delenv("NUMBA_CACHE_DIR")
    monkeypatch.setenv("ONCHIP_CACHE", str(tmp_path / "c"))
    jitcache.configure()
    assert numba.config.CACHE_DIR == str(jitcache.kernel_cache_dir(cache=tmp_path / "c"))


_PROBE = """
import numba
from onchip.fixed import FmtCode, OVERFLOW_MODES
from onchip.model.kernels import _wrap
print(_wrap(5, FmtCode(3, 0, 1, 0, OVERFLOW_MODES.index("WRAP"))), numba.config.CACHE_DIR)
"""


def _probe(src, numba_dir):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(numba_dir), "PYTHONPATH": str(src)}
    out = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, check=True)
    value, folder = out.stdout.split()
    return int(value), Path(folder)


def test_with_numba_cache_dir_set_an_edit_of_an_inlined_helper_gives_the_new_answer(tmp_path):
    """numba issue #1833: kernels.py's cached ``_wrap`` inlines fixed.py's ``overflow``; an edit of
    fixed.py alone must not leave the cached kernel running the old arithmetic."""
    src = tmp_path / "src"
    shutil.copytree(jitcache._PACKAGE, src / "onchip", ignore=shutil.ignore_patterns("__pycache__"))
    numba_dir = tmp_path / "numba"
    value, folder = _probe(src, numba_dir)
    assert value == -3  # 5 wraps to -3 in 3 signed bits
    assert any(numba_dir.rglob("*.nbi"))  # compiled and cached under NUMBA_CACHE_DIR
    assert _probe(src, numba_dir) == (-3, folder)  # a second process reads the same folder
    fixed = src / "onchip" / "fixed.py"
    text = fixed.read_text()
    wrap = "            return (value << (64 - width)) >> (64 - width)\n"
    assert text.count(wrap) == 1
    fixed.write_text(text.replace(wrap, "            return ((value << (64 - width)) >> (64 - width)) + 1\n"))
    value, edited = _probe(src, numba_dir)
    assert value == -2, "the cached kernel still runs the unedited helper"
    assert edited != folder and edited.parent == folder.parent == numba_dir
    assert any(folder.rglob("*.nbi")) and any(edited.rglob("*.nbi"))
