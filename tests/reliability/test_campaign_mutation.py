"""The campaign can fail: deliberately broken commits and pointer swaps are caught by its checks.

Each broken variant below is a mistake real checkpoint code makes. Put in place of the lab's
save_checkpoint or point(), each one makes the power-cut sweep report a lost or damaged
checkpoint, deterministically: the crash window is stepped through call by call, not hit by
chance. The same is kept for atomic_save, which still writes final.pt over an earlier file.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from campaign import atomic_save_sweep, commit_sweep

from resume_lab import atomic, checkpoint, run_folder
from resume_lab.atomic import fsync_dir, temp_path, write_synced
from resume_lab.checkpoint import MANIFEST, TEMP_PREFIX, make_manifest
from resume_lab.hashing import DEFAULT_HASH, FileDigest, HashingWriter


def written(files: dict[str, Any], folder: Path, sync: bool) -> dict[str, FileDigest]:
    digests = {}
    for name, obj in files.items():
        with open(folder / name, "xb") as f, HashingWriter(f, DEFAULT_HASH) as writer:
            torch.save(obj, writer)
            f.flush()
            if sync:
                os.fsync(f.fileno())
        digests[name] = writer.digest()
    return digests


def manifest_text(digests: dict[str, FileDigest], step: int, config: dict) -> str:
    manifest = make_manifest(digests, step=step, config=config, algorithm=DEFAULT_HASH)
    return json.dumps(manifest, indent=2, sort_keys=True) + "\n"


def write_file(path: Path, text: str, sync: bool) -> None:
    with open(path, "x", encoding="utf8") as f:
        f.write(text)
        f.flush()
        if sync:
            os.fsync(f.fileno())


def rename_before_fsync(files, folder, name, *, step, config, algorithm=DEFAULT_HASH) -> Path:
    """Commits first, syncs after: the directory appears while its bytes may not be on disk."""
    folder, tmp = Path(folder), Path(folder) / f"{TEMP_PREFIX}{name}"
    tmp.mkdir()
    digests = written(files, tmp, sync=False)
    write_file(tmp / MANIFEST, manifest_text(digests, step, config), sync=False)
    fsync_dir(tmp)
    os.rename(tmp, folder / name)
    fsync_dir(folder)
    for path in (folder / name).iterdir():
        with open(path, "rb+") as f:
            os.fsync(f.fileno())
    return folder / name


def without_folder_fsync(files, folder, name, *, step, config, algorithm=DEFAULT_HASH) -> Path:
    """Never syncs the folder after the rename: the commit may not survive a power cut."""
    folder, tmp = Path(folder), Path(folder) / f"{TEMP_PREFIX}{name}"
    tmp.mkdir()
    digests = {n: write_synced(obj, tmp / n) for n, obj in files.items()}
    write_file(tmp / MANIFEST, manifest_text(digests, step, config), sync=True)
    fsync_dir(tmp)
    os.rename(tmp, folder / name)
    return folder / name


def without_directory_fsync(files, folder, name, *, step, config, algorithm=DEFAULT_HASH) -> Path:
    """Syncs every file and the folder, never the new directory itself: its entries (the
    files' names) may not survive, and the committed directory comes back empty."""
    folder, tmp = Path(folder), Path(folder) / f"{TEMP_PREFIX}{name}"
    tmp.mkdir()
    digests = {n: write_synced(obj, tmp / n) for n, obj in files.items()}
    write_file(tmp / MANIFEST, manifest_text(digests, step, config), sync=True)
    os.rename(tmp, folder / name)
    fsync_dir(folder)
    return folder / name


def manifest_first(files, folder, name, *, step, config, algorithm=DEFAULT_HASH) -> Path:
    """Writes in place, the manifest first (its digests computed in memory): from then on the
    directory looks committed while its state file is still being written."""
    folder, target = Path(folder), Path(folder) / name
    target.mkdir()
    scratch = folder.parent / f"{name}-in-memory"
    scratch.mkdir()
    digests = written(files, scratch, sync=False)
    shutil.rmtree(scratch)
    write_file(target / MANIFEST, manifest_text(digests, step, config), sync=True)
    fsync_dir(target)
    fsync_dir(folder)
    written(files, target, sync=True)
    fsync_dir(target)
    return target


def point_by_unlink(folder: Path, pointer: str, target: Path) -> None:
    """Removes the old pointer, then makes the new one: two steps, with no pointer between."""
    (folder / pointer).unlink(missing_ok=True)
    os.symlink(target.name, folder / pointer)
    fsync_dir(folder)


def point_without_fsync(folder: Path, pointer: str, target: Path) -> None:
    """Swaps by rename but never syncs the folder: the swap may not survive a power cut."""
    tmp = folder / f"{pointer}.{TEMP_PREFIX}swap"
    os.symlink(target.name, tmp)
    os.replace(tmp, folder / pointer)


# variant: (module, name, broken function, whether the sweep publishes, a symptom it reports)
BROKEN_COMMITS = {
    "renaming before the fsync": (
        checkpoint,
        "save_checkpoint",
        rename_before_fsync,
        True,
        "step-000012 has a manifest but does not verify",
    ),
    "without the folder's fsync": (
        checkpoint,
        "save_checkpoint",
        without_folder_fsync,
        False,
        "after it returned: step-000012 is not durable",
    ),
    "without the new directory's fsync": (
        checkpoint,
        "save_checkpoint",
        without_directory_fsync,
        True,
        "after it returned: last does not verify",
    ),
    "with the manifest written first": (
        checkpoint,
        "save_checkpoint",
        manifest_first,
        True,
        "step-000012 has a manifest but does not verify",
    ),
    "a pointer removed, then made": (
        run_folder,
        "point",
        point_by_unlink,
        True,
        "last does not verify",
    ),
    "a pointer swapped without the folder's fsync": (
        run_folder,
        "point",
        point_without_fsync,
        True,
        "after it returned: last went back from update 12 to 8",
    ),
}


@pytest.fixture(autouse=True)
def one_thread():
    torch.set_num_threads(1)


def test_the_real_commit_passes(tmp_path: Path):
    assert commit_sweep(tmp_path / "publish", every_call=False).failures == []
    assert commit_sweep(tmp_path / "commit", every_call=False, publish=False).failures == []


@pytest.mark.parametrize("variant", BROKEN_COMMITS)
def test_a_broken_commit_fails_the_campaign(tmp_path: Path, monkeypatch, variant):
    module, name, broken, publish, symptom = BROKEN_COMMITS[variant]
    monkeypatch.setattr(module, name, broken)
    failures = commit_sweep(tmp_path, every_call=False, publish=publish).failures
    assert failures, f"the campaign did not notice a commit {variant}"
    assert any(symptom in failure for failure in failures), failures


# --- atomic_save (final.pt): the classic single-file mistakes ---------------------------------


def without_temp_file(obj: Any, path: str | os.PathLike[str], algorithm=DEFAULT_HASH):
    """Writes straight to the target: from the first byte on, the old file is gone."""
    path = Path(path)
    with open(path, "wb") as f:
        writer = HashingWriter(f)
        torch.save(obj, writer)
        f.flush()
        os.fsync(f.fileno())
    fsync_dir(path.parent)
    return writer.digest()


def atomic_rename_before_fsync(obj: Any, path: str | os.PathLike[str], algorithm=DEFAULT_HASH):
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


def atomic_without_folder_fsync(obj: Any, path: str | os.PathLike[str], algorithm=DEFAULT_HASH):
    """Never syncs the folder: the rename, and with it the new file, may not survive."""
    path = Path(path)
    tmp = temp_path(path)
    with open(tmp, "wb") as f:
        writer = HashingWriter(f)
        torch.save(obj, writer)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return writer.digest()


BROKEN_ATOMIC_SAVES = {
    "without a temporary file": (without_temp_file, "not the old or the new one"),
    "renaming before the fsync": (atomic_rename_before_fsync, "final.pt holds 0 bytes"),
    "without the folder's fsync": (atomic_without_folder_fsync, "after it returned"),
}


def test_the_real_atomic_save_passes(tmp_path: Path):
    assert atomic_save_sweep(tmp_path, every_call=False).failures == []


@pytest.mark.parametrize("variant", BROKEN_ATOMIC_SAVES)
def test_a_broken_atomic_save_fails_the_campaign(tmp_path: Path, monkeypatch, variant):
    broken, symptom = BROKEN_ATOMIC_SAVES[variant]
    monkeypatch.setattr(atomic, "atomic_save", broken)
    failures = atomic_save_sweep(tmp_path, every_call=False).failures
    assert failures, f"the campaign did not notice an atomic_save {variant}"
    assert any(symptom in failure for failure in failures), failures
