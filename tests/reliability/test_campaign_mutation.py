"""The campaign can fail: a deliberately broken atomic_save is caught by its core checks.

Each broken variant below is a mistake real checkpoint code makes. Put in place of the lab's
atomic_save, each one makes the power-cut sweep report a lost checkpoint, deterministically:
the crash window is stepped through call by call, not hit by chance.

(The Checkpoint callback alone would hide the first two mistakes: it saves every snapshot under
a new name and publishes it only after atomic_save has returned. They bite wherever a file is
saved over an existing one, as the demo's last.pt and every final.pt are.)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import torch
from campaign import atomic_save_sweep

from resume_lab import checkpoint
from resume_lab.checkpoint import FileDigest, HashingWriter, fsync_dir, temp_path


def without_temp_file(obj: Any, path: str | os.PathLike[str]) -> FileDigest:
    """Writes straight to the target: from the first byte on, the old checkpoint is gone."""
    path = Path(path)
    with open(path, "wb") as f:
        writer = HashingWriter(f)
        torch.save(obj, writer)
        f.flush()
        os.fsync(f.fileno())
    fsync_dir(path.parent)
    return writer.digest()


def rename_before_fsync(obj: Any, path: str | os.PathLike[str]) -> FileDigest:
    """Renames first: the name points at bytes that may not be on the disk yet."""
    path = Path(path)
    tmp = temp_path(path)
    with open(tmp, "wb") as f:
        writer = HashingWriter(f)
        torch.save(obj, writer)
        f.flush()
        os.replace(tmp, path)
        os.fsync(f.fileno())
    fsync_dir(path.parent)
    return writer.digest()


def without_folder_fsync(obj: Any, path: str | os.PathLike[str]) -> FileDigest:
    """Never syncs the folder: the rename, and with it the new checkpoint, may not survive."""
    path = Path(path)
    tmp = temp_path(path)
    with open(tmp, "wb") as f:
        writer = HashingWriter(f)
        torch.save(obj, writer)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return writer.digest()


BROKEN = {
    "without a temporary file": (without_temp_file, "not the old or the new one"),
    "renaming before the fsync": (rename_before_fsync, "last.pt holds 0 bytes"),
    "without the folder's fsync": (without_folder_fsync, "after the save returned"),
}


@pytest.fixture(autouse=True)
def one_thread():
    torch.set_num_threads(1)


def test_the_real_atomic_save_passes(tmp_path: Path):
    assert atomic_save_sweep(tmp_path, every_call=False).failures == []


@pytest.mark.parametrize("variant", BROKEN)
def test_a_broken_atomic_save_fails_the_campaign(tmp_path: Path, monkeypatch, variant):
    broken, symptom = BROKEN[variant]
    monkeypatch.setattr(checkpoint, "atomic_save", broken)  # save_checkpoint calls it too
    failures = atomic_save_sweep(tmp_path, every_call=False).failures
    assert failures, f"the campaign did not notice an atomic_save {variant}"
    assert any(symptom in failure for failure in failures), failures
