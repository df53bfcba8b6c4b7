"""Output folders: a refusal names the user's files, and an unwritable --out names --out and the
path, never the hidden staging folder."""

from __future__ import annotations

import pytest

from onchip.cli import main
from onchip.io import atomic_output_dir


def test_a_refused_folder_lists_the_users_files(tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    for name in ("notes.md", "shots.npy"):
        (out / name).write_text("x")
    assert main(["generate", "--spec", "kan-paper", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "holds files onchip did not write (notes.md, shots.npy)" in err
    assert sorted(p.name for p in out.iterdir()) == ["notes.md", "shots.npy"]


@pytest.mark.parametrize("where", ["/proc/onchip-out", "file/sub"])
def test_an_unwritable_out_names_the_flag_and_the_path(tmp_path, capsys, where):
    (tmp_path / "file").write_text("not a folder")
    out = where if where.startswith("/") else str(tmp_path / where)
    assert main(["generate", "--spec", "kan-paper", "--out", out]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"onchip generate: error: --out: cannot write {out!r}: "), err
    assert ".partial" not in err and err.count("\n") == 0
    if where == "file/sub":  # the cause named: a file where a folder must be
        assert f"{str(tmp_path / 'file')!r} is a file, not a folder" in err, err
    with pytest.raises((PermissionError, NotADirectoryError), match="--out: cannot write"):
        with atomic_output_dir(out):
            pass
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_verify_refuses_an_unwritable_out_before_it_simulates(tmp_path, capsys):
    (tmp_path / "file").write_text("not a folder")
    out = str(tmp_path / "file" / "sub")
    assert main(["verify", "--spec", "kan-paper", "--samples", "50", "--out", out]) == 2
    captured = capsys.readouterr()
    assert "is a file, not a folder" in captured.err
    assert "passed" not in captured.out + captured.err  # refused at parse time: no check ran


def test_a_mount_point_out_is_refused_before_any_work(tmp_path, capsys, monkeypatch):
    """A bind mount (a container's results folder) cannot be renamed over: refused up front, not
    after the job, whose output would then be lost."""
    import os

    out = tmp_path / "mnt"
    out.mkdir()
    real = os.path.ismount
    monkeypatch.setattr(os.path, "ismount", lambda p: str(p) == str(out) or real(p))
    assert main(["generate", "--spec", "kan-paper", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"onchip generate: error: --out: {str(out)!r} is a mount point, which the finished "
                   f"output cannot replace; name a new folder inside it (see onchip generate --help)"), err
    assert list(out.iterdir()) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["mnt"]


def test_a_folder_that_cannot_be_replaced_at_the_commit_names_out(tmp_path, monkeypatch):
    import errno

    from onchip import io

    def busy(stage, out):
        io._discard(stage)
        raise OSError(errno.EBUSY, "Device or resource busy")

    monkeypatch.setattr(io, "_commit", busy)
    out = tmp_path / "out"
    with pytest.raises(OSError, match=r"^\[Errno 16\] --out: cannot put the output at .*Device or resource busy"):
        with atomic_output_dir(out) as stage:
            (stage / "a.txt").write_text("x")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_an_output_written_inside_another_is_named_as_such(tmp_path, capsys):
    # the outer folder is not replaced over it (that would delete it), and the refusal says why,
    # instead of calling onchip's own files "not written by onchip"
    outer = tmp_path / "run"
    with atomic_output_dir(outer) as stage:
        (stage / "a.txt").write_text("1")
    assert main(["generate", "--spec", "kan-paper", "--out", str(outer / "sub")]) == 0
    capsys.readouterr()
    assert main(["generate", "--spec", "kan-paper", "--out", str(outer), "--force"]) == 2
    err = capsys.readouterr().err
    assert "holds sub/, another onchip output written inside it" in err and err.count("\n") == 1, err
    assert (outer / "sub" / ".onchip-output").is_file() and (outer / "a.txt").is_file()
