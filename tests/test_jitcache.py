"""The kernels' numba cache folder follows every source file the kernels are compiled from."""

import shutil

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


def test_configure_leaves_an_explicit_numba_cache_dir_alone(monkeypatch, tmp_path):
    monkeypatch.setattr(numba.config, "CACHE_DIR", "sentinel")
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    jitcache.configure()
    assert numba.config.CACHE_DIR == "sentinel"
    monkeypatch.delenv("NUMBA_CACHE_DIR")
    monkeypatch.setenv("ONCHIP_CACHE", str(tmp_path / "c"))
    jitcache.configure()
    assert numba.config.CACHE_DIR == str(jitcache.kernel_cache_dir(cache=tmp_path / "c"))
