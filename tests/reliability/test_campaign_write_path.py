"""Campaign, part 2: faults inside the write path, and a power cut before every call of a save.

A fault (the process lives on) at each stage of a checkpoint's commit (creating its temporary
directory, writing, fsync, the rename) leaves `last` naming the previous checkpoint, unchanged
and verifiable, no temporary directory, and an error that names the checkpoint and the cause.

A power cut (nothing after that call runs; only what was synced survives, see campaign.disk)
before each call of a save: the commit of a checkpoint directory and the swap of `last` leave
`last` verifiable at once, at the previous checkpoint or the new one; atomic_save (final.pt)
leaves the old file or the new one; a Checkpoint boundary (history log, commit, reload, `best`
and `last` swapped, rotation) leaves a folder whose `last` and `best` verify with no repair and
are at least as new as before. The only start-up step is clean_start, which deletes temporaries.
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
    commit_and_point,
    commit_sweep,
    copy_folder,
    freeze_boundary,
    record,
    restart_problems,
    sweep,
    temporaries,
)

from resume_lab.atomic import SaveError
from resume_lab.checkpoint import verify
from resume_lab.history_log import HISTORY_LOG, HistoryLog
from resume_lab.run_folder import LAST, STEP_NAME, point

FULL = pytest.mark.full
MODES = ["quick", pytest.param("full", marks=FULL)]


@pytest.fixture(autouse=True)
def one_thread():
    torch.set_num_threads(1)  # the root conftest puts the count back


def oserror(code: int) -> OSError:
    return OSError(code, os.strerror(code))


# (stage, which call fails, the error, what the message must say)
STAGES = {
    "read-only filesystem at mkdir": ("mkdir", 1, errno.EROFS, "Read-only file system"),
    "read-only filesystem at open": ("open", 1, errno.EROFS, "Read-only file system"),
    "full disk while writing": ("write", 5, errno.ENOSPC, "No space left on device"),
    "full disk reported by fsync": ("fsync", 1, errno.ENOSPC, "No space left on device"),
    "I/O error at the manifest's fsync": ("fsync", 2, errno.EIO, "Input/output error"),
    "I/O error at the directory's fsync": ("fsync_dir", 1, errno.EIO, "Input/output error"),
    "rename refused": ("rename", 1, errno.EXDEV, "Invalid cross-device link"),
}


def failing_call(folder: Path, run, kind: str, nth: int) -> int:
    """The index of the nth call of `kind` that `run` makes in `folder`."""
    disk = Disk(folder)
    with disk.watching():
        run()
    return [i for i, call in enumerate(disk.calls) if call.kind == kind][nth - 1]


@pytest.fixture
def run_at_8(tmp_path: Path) -> tuple[Path, Path, dict]:
    """A run folder whose `last` names step-000008, and a template copy of it."""
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / HISTORY_LOG).touch()
    commit_and_point(a_training_state(8), folder)
    copy_folder(folder, tmp_path / "template")
    return folder, tmp_path / "template", a_training_state(12)


@pytest.mark.parametrize("stage", STAGES)
def test_a_fault_at_each_stage_leaves_the_previous_file(run_at_8, stage):
    folder, template, newer = run_at_8
    kind, nth, code, reason = STAGES[stage]
    before = verify(folder / LAST)
    index = failing_call(folder, lambda: commit_and_point(newer, folder), kind, nth)
    copy_folder(template, folder)

    disk = Disk(folder, fail_at=index, error=lambda: oserror(code))
    with disk.watching(), pytest.raises(SaveError) as failed:
        commit_and_point(newer, folder)
    target = folder / "step-000012"
    assert str(failed.value) == f"could not save {target}: {reason}; step-000012 was not replaced"
    assert failed.value.errno == code and isinstance(failed.value.__cause__, OSError)
    assert verify(folder / LAST) == before  # `last` still names step-000008, whole
    assert temporaries(folder) == [] and not target.exists()


def test_a_failure_mid_pickle_leaves_the_previous_checkpoint(run_at_8):
    folder, _, newer = run_at_8
    before = verify(folder / LAST)
    # A callback whose state is not plain data: pickling fails partway through the object.
    broken = {**newer, "callbacks": {"custom": {"schedule": lambda step: step}}}
    # Python's own message names the object (AttributeError for a local function).
    with pytest.raises((pickle.PicklingError, AttributeError), match="Can't pickle local object"):
        commit_and_point(broken, folder)
    assert verify(folder / LAST) == before
    assert temporaries(folder) == []


@pytest.mark.parametrize("mode", MODES)
def test_a_power_cut_at_any_call_of_a_commit_and_pointer_swap_keeps_last(tmp_path: Path, mode):
    """The commit (temporary directory, files, manifest, rename, fsyncs) and the swap of `last`:
    in every world, `last` verifies at once and names the old or the new checkpoint."""
    result = commit_sweep(tmp_path, every_call=mode == "full")
    assert result.failures == []
    kinds = {call.kind for call in result.calls}
    assert {"mkdir", "open", "write", "fsync", "fsync_dir", "rename", "symlink", "replace"} <= kinds
    if mode == "full":
        record(
            "power_cuts_commit",
            points=result.points,
            worlds=result.worlds,
            calls=len(result.calls),
            losses=len(result.failures),
        )


@pytest.mark.parametrize("mode", MODES)
def test_a_power_cut_at_any_call_of_atomic_save_keeps_a_whole_checkpoint(tmp_path: Path, mode):
    """final.pt is still one file saved over an earlier one (with final.json beside it)."""
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
    pytest.param("quick", "save+best", id="quick-save+best"),
    pytest.param("full", "save", id="full-save", marks=FULL),
    pytest.param("full", "best", id="full-best", marks=FULL),
    pytest.param("full", "save+best", id="full-save+best", marks=FULL),
]


@pytest.mark.parametrize(("mode", "kind"), BOUNDARIES)
def test_a_power_cut_at_any_call_of_a_checkpoint_boundary_loses_nothing(tmp_path: Path, mode, kind):
    """A boundary whose checkpoint `last` will name, one whose checkpoint `best` will name, and
    one that does both. Quick: both, each distinct call. Full: every kind and every call, and
    the restart also saves again and leaves nothing temporary or stale."""
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
    calls = {(call.kind, call.name) for call in result.calls}
    assert ("fsync", HISTORY_LOG) in calls  # the log is synced before the checkpoint names it
    assert ("replace", "last") in calls  # every save moves last, a best-only one too
    assert ("replace", "best") in calls if "best" in kind else ("replace", "best") not in calls
    assert any(kind == "rmdir" for kind, _ in calls)  # rotation ran inside the sweep
    if full:
        record(
            f"power_cuts_{kind.replace('+', '_')}",
            points=result.points,
            worlds=result.worlds,
            calls=len(result.calls),
            losses=len(result.failures),
        )


def test_a_power_cut_while_a_restart_commits_the_same_step_again_loses_nothing(tmp_path: Path):
    """A run killed after it committed step N, before `last` moved, restarts from N-1, replays
    update N and commits step N again: the directory exists already. A power cut at any call of
    that second commit must lose nothing."""
    boundary = freeze_boundary(tmp_path / "setup", "save")
    folder = tmp_path / "disk"
    boundary.reset(folder)
    previous = os.readlink(folder / LAST)
    boundary.run()  # the first life committed this step; its kill left `last` where it was
    point(folder, LAST, folder / previous)
    copy_folder(folder, boundary.template)
    fresh = HistoryLog(folder / HISTORY_LOG)  # the restart's log: it attaches to the file
    boundary.log_fields = {k: v for k, v in fresh.__dict__.items() if k != "path"}
    result = sweep(
        boundary.run,
        folder,
        lambda: boundary.reset(folder),
        boundary_check(boundary, tmp_path / "worlds", then_save=False),
        every_call=False,
        check_done=boundary_check(boundary, tmp_path / "done", then_save=False, done=True),
    )
    assert result.failures == []
    assert ("rename", "step-000024") not in {(c.kind, c.name) for c in result.calls}  # kept


@pytest.mark.parametrize("mode", MODES)
def test_a_fault_at_any_call_of_a_checkpoint_boundary_loses_nothing(tmp_path: Path, mode):
    """ENOSPC raised by each call in turn: the save stops with an error that names a path and
    the cause (or a fallback absorbs it), nothing temporary stays but a checkpoint directory
    whose manifest rotation had already deleted (never loaded; the next start removes it), and
    a restart loses nothing."""
    full = mode == "full"
    boundary = freeze_boundary(tmp_path / "setup", "save+best")
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
        left = [name for name in temporaries(folder) if not STEP_NAME.fullmatch(name)]
        if left:
            problems.append(f"call {index}: left {left}")
        after = tmp_path / "after"
        copy_folder(folder, after)
        problems += [f"call {index}: {p}" for p in restart_problems(after, boundary.expect)]
    assert problems == []
    assert failed > len(points) // 2  # most faults stop the save; a few are absorbed
    if full:
        record("write_faults", points=len(points), errors=failed, losses=len(problems))
