"""The core stays lean: with every optional package unimportable, `import onchip`, its public
names and the hardware commands work, and a command that needs an extra names it."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from onchip.extras import PROVIDERS

#: a child interpreter in which every package an extra provides fails to import, as in a
#: `pip install onchip` without extras; CHILD_BODY runs after it
BLOCKER = textwrap.dedent("""
    import importlib.abc, sys
    BLOCKED = set(sys.argv[1].split(","))

    class Blocker(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)

    sys.meta_path.insert(0, Blocker())
    for name in list(sys.modules):  # nothing imported before the blocker survives it
        if name.partition(".")[0] in BLOCKED:
            del sys.modules[name]
""")


def run_child(body: str, tmp_path, blocked=tuple(PROVIDERS)) -> dict:
    """Run ``body`` (which fills the dict ``result``) under the blocker; return ``result``."""
    code = BLOCKER + "result = {}\n" + textwrap.dedent(body) + \
        "\nimport json\nprint('RESULT' + json.dumps(result))\n"
    proc = subprocess.run([sys.executable, "-c", code, ",".join(blocked)], capture_output=True, text=True,
                          cwd=tmp_path, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT"))
    return json.loads(line.removeprefix("RESULT"))


def test_the_blocker_blocks_and_the_check_fails_when_a_core_path_imports_torch(tmp_path):
    """The check can fail: an import of torch from a core module under the blocker raises, and
    the names a core path loads are watched."""
    result = run_child("""
        try:
            import torch
            result["torch"] = "imported"
        except ModuleNotFoundError as exc:
            result["torch"] = exc.name
    """, tmp_path)
    assert result["torch"] == "torch"
    code = BLOCKER + "import onchip.model.float_twin as f\nf.FloatTwin(__import__('onchip').PRESETS['kan-paper'])\n"
    proc = subprocess.run([sys.executable, "-c", code, "torch"], capture_output=True, text=True)
    assert proc.returncode != 0 and '"ml" extra' in proc.stderr


def test_core_commands_and_public_names_work_without_any_extra(tmp_path):
    result = run_child("""
        import contextlib, io, os, sys
        import onchip
        from onchip.cli import main

        result["names"] = {n: getattr(onchip, n) is not None for n in onchip.__all__}

        def cli(*argv):
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                status = main(list(argv))
            return {"status": status, "stdout": out.getvalue(), "stderr": err.getvalue()}

        result["help"] = cli("--help")
        result["run"] = cli("run", "--samples", "3000", "--out", "run", "--quiet")
        result["run_files"] = sorted(os.listdir("run")) if os.path.isdir("run") else []
        result["generate"] = cli("generate", "--spec", "kan-paper", "--out", "gen")
        result["synth"] = cli("synth", "--spec", "kan-paper", "--out", "synth")
        result["verify"] = cli("verify", "--spec", "kan-paper", "--samples", "200", "--out", "verify", "--quiet")
        result["float"] = cli("run", "--backend", "float", "--samples", "3000", "--out", "float")
        result["seed_method"] = cli("token-search", "--quick", "--out", "ts")
        result["leaked"] = sorted({m.partition(".")[0] for m in sys.modules} & BLOCKED)
    """, tmp_path)
    assert all(result["names"].values()), result["names"]
    for command in ("help", "run", "generate", "synth", "verify"):
        assert result[command]["status"] == 0, (command, result[command])
    assert "hardware:" in result["help"]["stdout"] and "seed methods" in result["help"]["stdout"]
    assert "metrics.json" in result["run_files"]
    assert "10 passed, 0 failed" in result["verify"]["stdout"]
    assert result["leaked"] == []
    # a command that needs an extra stops with one line naming it, and writes nothing
    for command, extra, folder in (("float", "ml", "float"), ("seed_method", "methods", "ts")):
        got = result[command]
        assert got["status"] == 2, got
        assert got["stderr"].strip().count("\n") == 0, got["stderr"]
        assert f'pip install "onchip[{extra}]"' in got["stderr"], got["stderr"]
        assert not (tmp_path / folder).exists()


@pytest.mark.parametrize("package, extra", [("torch", "ml"), ("distributed", "dask"), ("transformers", "methods")])
def test_missing_extra_names_the_extra(package, extra):
    code = BLOCKER + f"from onchip.extras import need\nneed({package!r}, 'the thing')\n"
    proc = subprocess.run([sys.executable, "-c", code, package], capture_output=True, text=True)
    assert proc.returncode != 0
    assert f'MissingExtra: the thing needs the "{extra}" extra (no module {package!r}): ' \
           f'pip install "onchip[{extra}]"' in proc.stderr, proc.stderr
    # an extra that brings torch names the CPU index: PyPI's torch is the CUDA build, several GB
    cpu_index = "--extra-index-url https://download.pytorch.org/whl/cpu"
    assert (cpu_index in proc.stderr) == (extra in ("ml", "methods")), proc.stderr


def test_need_returns_an_installed_module():
    from onchip.extras import need

    assert need("numpy.linalg", "the thing").__name__ == "numpy.linalg"


def test_the_seed_methods_said_to_need_no_extra_run_without_any(tmp_path):
    """`onchip ais` ran in the core install while every page said the seed methods need the
    `methods` extra: the ones that do not are named in the help and on the seed-methods page, and
    run (quick) with every optional package blocked. (Every other method, run the same way,
    stops with the one-line `pip install "onchip[methods]"`: checked by hand, 2026-12-07.)"""
    from pathlib import Path

    from onchip.cli import CORE_METHODS, SEED_GROUP

    result = run_child(f"""
        import contextlib, io, sys
        from onchip.cli import main

        for name in {list(CORE_METHODS)!r}:
            err = io.StringIO()
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
                result[name] = [main([name, "--quick", "--quiet", "--out", name]), err.getvalue()[-2000:]]
        result["leaked"] = sorted({{m.partition(".")[0] for m in sys.modules}} & BLOCKED)
    """, tmp_path)
    page = (Path(__file__).resolve().parents[1] / "seeds" / "README.md").read_text()
    for name in CORE_METHODS:
        assert result[name][0] == 0, result[name]
        assert (tmp_path / name / "metrics.json").exists()
        assert f"`onchip {name}`" in page and name in SEED_GROUP
    assert result["leaked"] == []
