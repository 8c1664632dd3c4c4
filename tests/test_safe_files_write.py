"""`spec.safe_files.write_atomic`: permission bits of a replaced file are kept, a new file
gets 0o666 & ~umask, the directory is fsynced after the rename, and the checkpoint writer
goes through it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np
import pytest

from runtime.training import checkpoint as ck
from spec import safe_files
from spec.safe_files import write_atomic


def _mode(p: Path) -> int:
    return stat.S_IMODE(os.stat(p).st_mode)


def test_replacing_keeps_the_permission_bits(tmp_path: Path) -> None:
    p = tmp_path / "out.json"
    p.write_text("old")
    os.chmod(p, 0o640)
    write_atomic(str(p), "new")
    assert p.read_text() == "new" and _mode(p) == 0o640


def test_a_new_file_follows_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        write_atomic(str(tmp_path / "n.json"), b"x")
    finally:
        os.umask(old)
    assert _mode(tmp_path / "n.json") == 0o640


def test_the_directory_is_synced_after_the_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[str] = []
    real_replace, real_fsync = os.replace, os.fsync

    def replace(a: str, b: str) -> None:
        events.append("replace")
        real_replace(a, b)

    def fsync(fd: int) -> None:
        events.append("dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real_fsync(fd)

    monkeypatch.setattr(safe_files.os, "replace", replace)
    monkeypatch.setattr(safe_files.os, "fsync", fsync)
    write_atomic(str(tmp_path / "d.json"), "x")
    assert events == ["file", "replace", "dir"]


def test_checkpoints_keep_permission_bits_through_the_shared_writer(tmp_path: Path) -> None:
    p = tmp_path / "s.json"
    ck.save_state(p, [np.array([1.0], np.float32)], "float32")
    os.chmod(p, 0o600)
    ck.save_state(p, [np.array([2.0], np.float32)], "float32")
    assert _mode(p) == 0o600
    assert ck.load_state(p, [(1,)], "float32")[0][0] == np.float32(2.0)
