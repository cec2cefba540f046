"""The run folder's housekeeping: committed checkpoint directories, the
`last` and `best` pointers, and the clean-up of a start and of rotation
(run_files.py names every file).

A pointer is a symlink rather than a small file naming the directory: the
swap is the same one rename, and every tool follows it (`ls -l`, `cp -rL`,
`tar -h`, a loader that knows nothing of this lab).
"""

from __future__ import annotations

import os
import secrets
import shutil
from pathlib import Path

from resume_lab.atomic import SaveError, fsync_dir
from resume_lab.run_files import (
    BEST,
    LAST,
    MANIFEST,
    POINTERS,
    STEP_NAME,
    TEMP_PREFIX,
    checkpoint_name,
    step_of,
)

__all__ = [
    "BEST",
    "LAST",
    "POINTERS",
    "STEP_NAME",
    "checkpoint_name",
    "clean_start",
    "committed",
    "point",
    "pointed",
    "rotate",
    "step_of",
]


def committed(folder: Path) -> list[Path]:
    """Checkpoint directories with a manifest, oldest first."""
    found = [
        p
        for p in folder.iterdir()
        if STEP_NAME.fullmatch(p.name) and (p / MANIFEST).is_file()
    ]
    return sorted(found, key=step_of)


# --8<-- [start:point]
def point(folder: Path, pointer: str, checkpoint: Path) -> None:
    """Make `folder/pointer` name `checkpoint`, in one atomic step: a new
    relative symlink, renamed over the old one."""
    tmp = folder / f"{pointer}.{TEMP_PREFIX}{secrets.token_hex(4)}"
    try:
        # relative: the run folder can be moved or copied as a whole
        os.symlink(checkpoint.name, tmp)
        os.replace(tmp, folder / pointer)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise SaveError(folder / pointer, err) from err
    fsync_dir(folder)


# --8<-- [end:point]


def pointed(folder: Path, pointer: str) -> Path | None:
    """The checkpoint directory a pointer names, or None if there is no
    pointer (a dangling one is returned as it is: loading it says so)."""
    path = folder / pointer
    if not path.is_symlink():
        return None
    return folder / os.readlink(path)


def remove_checkpoint(checkpoint: Path) -> None:
    """The manifest first, so that a deletion cut short never leaves what
    looks like a whole checkpoint."""
    (checkpoint / MANIFEST).unlink(missing_ok=True)
    fsync_dir(checkpoint)
    shutil.rmtree(checkpoint, ignore_errors=True)


# --8<-- [start:clean_start]
def clean_start(folder: Path) -> list[str]:
    """Remove what a killed save or rotation left: temporary directories and
    pointers, and checkpoint directories without a manifest. Returns a line
    for each. Nothing committed is touched, and nothing needs repair."""
    removed = []
    for path in sorted(folder.iterdir()):
        temporary = path.name.startswith(TEMP_PREFIX) or any(
            path.name.startswith(f"{p}.{TEMP_PREFIX}") for p in POINTERS
        )
        uncommitted = (
            STEP_NAME.fullmatch(path.name) is not None
            and path.is_dir()
            and not (path / MANIFEST).exists()
        )
        if not (temporary or uncommitted):
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
        removed.append(f"removed {path.name}, left by an interrupted save")
    return removed


# --8<-- [end:clean_start]


# --8<-- [start:rotate]
def rotate(folder: Path, keep: int) -> list[Path]:
    """Delete all but the newest `keep` checkpoints, sparing any that a
    pointer names. Returns what was deleted."""
    spared = {pointed(folder, p) for p in POINTERS}
    old = [c for c in committed(folder)[:-keep] if c not in spared]
    for checkpoint in old:
        remove_checkpoint(checkpoint)
    return old


# --8<-- [end:rotate]
