"""Campaign, part 2: faults inside the write path, and a power cut before every call of a save.

A fault (the process lives on) at each stage of atomic_save — mid-pickle, a full disk while
writing, a failing fsync, a failing rename, a read-only filesystem — leaves the previous file
byte-identical, no temporary file, and an error that names the file and the cause.

A power cut (nothing after that call runs; only synced data survives, see campaign.Disk)
before each call that a save makes: atomic_save leaves the old file or the complete new one;
a Checkpoint boundary (snapshot, manifest, reload, publish last.pt and best.pt, rotation)
leaves a folder from which a restart resumes at least where it was.
"""

from __future__ import annotations

import errno
import os
import pickle
from pathlib import Path

import pytest
import torch
from campaign import (
    Disk,
    a_training_state,
    atomic_save_sweep,
    boundary_check,
    copy_folder,
    freeze_boundary,
    record,
    restart_problems,
    sweep,
    temp_files,
)

from resume_lab.checkpoint import SaveError, atomic_save, atomic_write_bytes

FULL = pytest.mark.full
MODES = ["quick", pytest.param("full", marks=FULL)]


@pytest.fixture(autouse=True)
def one_thread():
    torch.set_num_threads(1)  # the root conftest puts the count back


def oserror(code: int) -> OSError:
    return OSError(code, os.strerror(code))


# (stage, which call fails, the error, what the message must say)
STAGES = {
    "read-only filesystem at open": ("open", 1, errno.EROFS, "Read-only file system"),
    "full disk while writing": ("write", 5, errno.ENOSPC, "No space left on device"),
    "full disk reported by fsync": ("fsync", 1, errno.ENOSPC, "No space left on device"),
    "I/O error at fsync": ("fsync", 1, errno.EIO, "Input/output error"),
    "rename refused": ("replace", 1, errno.EXDEV, "Invalid cross-device link"),
}


def failing_call(folder: Path, run, kind: str, nth: int) -> int:
    """The index of the nth call of `kind` that `run` makes in `folder`."""
    disk = Disk(folder)
    with disk.watching():
        run()
    return [i for i, call in enumerate(disk.calls) if call.kind == kind][nth - 1]


@pytest.mark.parametrize("stage", STAGES)
def test_a_fault_at_each_stage_leaves_the_previous_file(tmp_path: Path, stage):
    kind, nth, code, reason = STAGES[stage]
    path = tmp_path / "last.pt"
    older, newer = a_training_state(8), a_training_state(12)
    atomic_save(older, path)
    before = path.read_bytes()
    index = failing_call(tmp_path, lambda: atomic_save(newer, path), kind, nth)
    atomic_save(older, path)  # back to the previous checkpoint

    disk = Disk(tmp_path, fail_at=index, error=lambda: oserror(code))
    with disk.watching(), pytest.raises(SaveError) as failed:
        atomic_save(newer, path)
    assert str(failed.value) == f"could not save {path}: {reason}; last.pt was not replaced"
    assert failed.value.errno == code and isinstance(failed.value.__cause__, OSError)
    assert path.read_bytes() == before  # byte-identical
    assert temp_files(tmp_path) == []


def test_a_failure_mid_pickle_leaves_the_previous_file(tmp_path: Path):
    path = tmp_path / "last.pt"
    atomic_save(a_training_state(8), path)
    before = path.read_bytes()
    # A callback whose state is not plain data: pickling fails partway through the object.
    broken = {**a_training_state(12), "callbacks": {"custom": {"schedule": lambda step: step}}}
    # Python's own message names the object (AttributeError for a local function).
    with pytest.raises((pickle.PicklingError, AttributeError), match="Can't pickle local object"):
        atomic_save(broken, path)
    assert path.read_bytes() == before
    assert temp_files(tmp_path) == []


def test_a_full_disk_while_writing_the_manifest_leaves_the_previous_manifest(tmp_path: Path):
    path = tmp_path / "last.json"
    atomic_write_bytes(path, b'{"step": 8}\n')
    disk = Disk(tmp_path, fail_at=1)  # call 0 opens the temporary file, call 1 writes to it
    with disk.watching(), pytest.raises(SaveError) as failed:
        atomic_write_bytes(path, b'{"step": 12}\n')
    assert str(failed.value).endswith(
        "last.json: No space left on device; last.json was not replaced"
    )
    assert path.read_bytes() == b'{"step": 8}\n'
    assert temp_files(tmp_path) == []


@pytest.mark.parametrize("mode", MODES)
def test_a_power_cut_at_any_call_of_atomic_save_keeps_a_whole_checkpoint(tmp_path: Path, mode):
    result = atomic_save_sweep(tmp_path, every_call=mode == "full")
    assert result.failures == []
    kinds = {call.kind for call in result.calls}
    assert {"open", "write", "fsync", "replace", "fsync_dir"} <= kinds
    if mode == "full":
        record(
            "power_cuts_atomic_save",
            points=result.points,
            worlds=result.worlds,
            losses=len(result.failures),
        )


BOUNDARIES = [
    pytest.param("quick", "save", id="quick-save"),
    pytest.param("full", "save", id="full-save", marks=FULL),
    pytest.param("full", "best", id="full-best", marks=FULL),
    pytest.param("full", "save+best", id="full-save+best", marks=FULL),
]


@pytest.mark.parametrize(("mode", "kind"), BOUNDARIES)
def test_a_power_cut_at_any_call_of_a_checkpoint_boundary_loses_nothing(tmp_path: Path, mode, kind):
    """A boundary that saves a snapshot and publishes it as last.pt, one that publishes a new
    best.pt, and one that does both. Quick: one kind, each distinct call. Full: every kind and
    every call, and the next start also saves again and leaves no stale or half-published file.
    """
    full = mode == "full"
    boundary = freeze_boundary(tmp_path / "setup", kind)
    folder = tmp_path / "disk"
    result = sweep(
        boundary.run,
        folder,
        lambda: boundary.reset(folder),
        boundary_check(boundary, tmp_path / "worlds", then_save=full),
        every_call=full,
        check_done=boundary_check(boundary, tmp_path / "done", then_save=full, done=True),
    )
    assert result.failures == []
    published = {call.name for call in result.calls if call.kind == "replace"}
    assert {"last.pt", "last.json"} <= published if "save" in kind else True
    assert {"best.pt", "best.json"} <= published if "best" in kind else True
    if full:
        record(
            f"power_cuts_{kind.replace('+', '_')}",
            points=result.points,
            worlds=result.worlds,
            losses=len(result.failures),
        )


def test_a_power_cut_while_a_restart_republishes_the_same_best_loses_nothing(tmp_path: Path):
    """After a restart from a last.pt older than best.pt, the run replays the update whose best
    it had already published, and publishes it again: same update, new bytes (its step times
    differ). A power cut between the two renames of that publish must not lose best.pt."""
    boundary = freeze_boundary(tmp_path / "setup", "best")
    folder = tmp_path / "disk"
    boundary.reset(folder)
    boundary.run()  # the first life published best.pt at this update
    copy_folder(folder, boundary.template)
    boundary.expect = boundary.expect_done
    boundary.trainer.history[-1]["step_time"] *= 1.5  # the replayed update took its own time
    result = sweep(
        boundary.run,
        folder,
        lambda: boundary.reset(folder),
        boundary_check(boundary, tmp_path / "worlds", then_save=False),
        every_call=False,
    )
    assert result.failures == []


@pytest.mark.parametrize("mode", MODES)
def test_a_fault_at_any_call_of_a_checkpoint_boundary_loses_nothing(tmp_path: Path, mode):
    """ENOSPC raised by each call in turn: the save stops with an error that names a file and
    the cause (or a fallback absorbs it), no temporary file stays, and a restart loses nothing."""
    full = mode == "full"
    boundary = freeze_boundary(tmp_path / "setup", "save+best" if full else "save")
    folder = tmp_path / "disk"
    boundary.reset(folder)
    disk = Disk(folder)
    with disk.watching():
        boundary.run()
    points = range(len(disk.calls)) if full else sorted({0, *range(1, len(disk.calls), 7)})
    problems, failed = [], 0
    for index in points:
        boundary.reset(folder)
        try:
            with Disk(folder, fail_at=index).watching():
                boundary.run()
        except OSError as err:
            failed += 1
            named = folder.name in str(err) or any(p.name in str(err) for p in folder.iterdir())
            if "No space left on device" not in str(err) or not named:
                problems.append(f"call {index}: unclear error {err!r}")
        if temp_files(folder):
            problems.append(f"call {index}: left {temp_files(folder)}")
        after = tmp_path / "after"
        copy_folder(folder, after)
        problems += [f"call {index}: {p}" for p in restart_problems(after, boundary.expect)]
    assert problems == []
    assert failed > len(points) // 2  # most faults stop the save; a few are absorbed
    if full:
        record("write_faults", points=len(points), errors=failed, losses=len(problems))
