"""What the power-cut sweeps run: a checkpoint committed and published over an earlier one,
atomic_save over an existing file (final.pt), and a Checkpoint boundary frozen just before it
saves."""

from __future__ import annotations

import copy
import functools
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from campaign.checks import leftovers, restart_problems
from campaign.disk import SweepResult, World, materialize, sweep
from resume_lab.callbacks import Callback, Checkpoint
from resume_lab.checkpoint import STATE_FILE, CheckpointError, verify
from resume_lab.config import LabConfig
from resume_lab.history_log import HISTORY_LOG, HistoryLog
from resume_lab.run_folder import BEST, LAST, checkpoint_name

RUN_CONFIG = LabConfig(steps=40, eval_every=4, patience=None)


def copy_folder(source: Path, target: Path) -> None:
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target, symlinks=True)


def a_training_state(step: int) -> dict[str, Any]:
    """A real checkpoint's contents: the lab's training state after `step` updates (its
    history mark names no log: these states are saved outside a run folder's history)."""
    return copy.deepcopy(_training_state(step))


@functools.cache
def _training_state(step: int) -> dict[str, Any]:
    from resume_lab.build import build_trainer
    from resume_lab.hashing import new_hasher
    from resume_lab.resume import training_state

    trainer = build_trainer(RUN_CONFIG, init_seed=0)
    trainer.fit(step)
    empty = {"records": 0, "bytes": 0, "hash": "blake3", "digest": new_hasher("blake3").hexdigest()}
    return training_state(trainer, empty)


# --- a checkpoint committed and published over an earlier one --------------------------------


def commit_and_point(state: dict[str, Any], folder: Path) -> Path:
    """The two steps of a save, looked up when called (a test may put broken ones in place):
    commit the directory, then swap `last` to it."""
    from resume_lab import checkpoint, run_folder

    step = state["step"]
    target = checkpoint.save_checkpoint(
        {STATE_FILE: state}, folder, checkpoint_name(step), step=step, config=state["config"]
    )
    run_folder.point(folder, LAST, target)
    return target


def commit_sweep(workdir: Path, *, every_call: bool, publish: bool = True) -> SweepResult:
    """Power cuts while step-000012 is committed beside step-000008 and, with `publish`, `last`
    is swapped to it. In every world `last` verifies at once and names update 8 or 12, and every
    directory that has a manifest verifies. Once the operation has returned, step-000012 is
    durable (and `last` names it, with `publish`)."""
    from resume_lab import checkpoint

    folder = workdir / "disk"
    folder.mkdir(parents=True)
    old, new = a_training_state(8), a_training_state(12)
    (folder / HISTORY_LOG).touch()  # their history marks name none of it
    commit_and_point(old, folder)
    template = workdir / "template"
    copy_folder(folder, template)
    counter = iter(range(1_000_000))

    def run() -> None:
        if publish:
            commit_and_point(new, folder)
        else:
            name, config = checkpoint_name(12), new["config"]
            checkpoint.save_checkpoint({STATE_FILE: new}, folder, name, step=12, config=config)

    def holds(*allowed: int, done: bool = False) -> Callable[[World], list[str]]:
        def check(world: World) -> list[str]:
            scratch = materialize(world, workdir / "worlds" / str(next(counter)))
            problems = restart_problems(scratch, {LAST: min(allowed)})
            if not problems and verify(scratch / LAST)["step"] not in allowed:
                problems.append(f"{LAST} names update {verify(scratch / LAST)['step']}")
            if done:
                try:
                    verify(scratch / checkpoint_name(12))
                except CheckpointError as err:
                    problems.append(f"{checkpoint_name(12)} is not durable: {err}")
            shutil.rmtree(scratch)
            return problems

        return check

    return sweep(
        run,
        folder,
        lambda: copy_folder(template, folder),
        holds(8, 12),
        every_call=every_call,
        check_done=holds(12, done=True) if publish else holds(8, done=True),
    )


# --- atomic_save over an existing file (final.pt) ---------------------------------------------


def atomic_save_sweep(workdir: Path, *, every_call: bool) -> SweepResult:
    """Power cuts during the lab's atomic_save (looked up when called, so that a test can put a
    broken one in its place) over an existing file: final.pt must always hold the previous
    bytes or the complete new ones, and the new ones once atomic_save has returned."""
    from resume_lab import atomic

    folder = workdir / "disk"
    folder.mkdir(parents=True)
    old, new = a_training_state(8), a_training_state(12)
    path = folder / "final.pt"
    atomic.atomic_save(old, path)
    old_bytes = path.read_bytes()
    template = workdir / "template"
    copy_folder(folder, template)
    atomic.atomic_save(new, path)
    new_bytes = path.read_bytes()

    def holds(*allowed: bytes) -> Callable[[World], list[str]]:
        def check(world: World) -> list[str]:
            kind, held = world.get("final.pt", (None, None))
            if kind == "file" and held in allowed:
                return []
            size = "no file" if held is None else f"{len(held)} bytes"
            wanted = "the new file" if len(allowed) == 1 else "the old or the new one"
            return [f"final.pt holds {size}, not {wanted}"]

        return check

    return sweep(
        lambda: atomic.atomic_save(new, path),
        folder,
        lambda: copy_folder(template, folder),
        holds(old_bytes, new_bytes),
        every_call=every_call,
        check_done=holds(new_bytes),
    )


# --- a Checkpoint boundary, frozen just before it saves ---------------------------------------


BOUNDARY_CONFIG = LabConfig(steps=60, eval_every=2, patience=None)
BOUNDARY_EVERY, BOUNDARY_KEEP = 4, 2


class FreezeBeforeSaving(Callback):
    """Stops the run (from update `after` on) at the first boundary of the kind wanted, before
    the Checkpoint callback acts on it. Kinds: "save" (a checkpoint `last` will name), "best"
    (one `best` will name), "save+best" (both)."""

    class Frozen(Exception):
        pass

    def __init__(self, saver: Checkpoint, after: int, kind: str) -> None:
        self.saver, self.after, self.kind = saver, after, kind

    def on_boundary(self, trainer: Any) -> None:
        saves = trainer.step % self.saver.every == 0
        best = self.saver._best_is_new
        kind = "save+best" if saves and best else "save" if saves else "best" if best else None
        if trainer.step >= self.after and kind == self.kind:
            raise self.Frozen


@dataclass
class Boundary:
    """A trainer and its Checkpoint callback at an update boundary, before the callback runs."""

    trainer: Any
    saver: Checkpoint
    template: Path  # the folder as it was before the boundary
    saver_fields: dict[str, Any]
    log_fields: dict[str, Any]
    expect: dict[str, int]  # newest step each pointer names before the boundary
    expect_done: dict[str, int]  # ... and once the boundary has been saved

    def reset(self, folder: Path) -> None:
        copy_folder(self.template, folder)
        self.saver.__dict__.update(self.saver_fields)
        self.saver.folder = folder
        if self.saver._current is not None:
            self.saver._current = folder / self.saver._current.name
        log = HistoryLog(folder / self.saver.history_log.path.name)
        log.__dict__.update(self.log_fields)
        log._hasher = self.log_fields["_hasher"].copy()  # a running hash: each attempt its own
        self.saver.history_log = log

    def run(self) -> None:
        self.saver.on_boundary(self.trainer)


def freeze_boundary(workdir: Path, kind: str) -> Boundary:
    from resume_lab.build import build_trainer

    folder = workdir / "frozen"
    folder.mkdir(parents=True)
    saver = Checkpoint(folder, every=BOUNDARY_EVERY, keep=BOUNDARY_KEEP)
    freeze = FreezeBeforeSaving(saver, after=12, kind=kind)
    trainer = build_trainer(BOUNDARY_CONFIG, init_seed=0, callbacks=[freeze, saver])
    try:
        trainer.fit(BOUNDARY_CONFIG.steps)
        raise AssertionError("no boundary of the kind wanted in the run")
    except FreezeBeforeSaving.Frozen:
        pass
    template = workdir / "template"
    copy_folder(folder, template)
    expect = {name: verify(template / name)["step"] for name in (LAST, BEST)}
    done = {
        name: trainer.step if part in kind else expect[name]
        for name, part in ((LAST, "save"), (BEST, "best"))
    }
    fields = {k: v for k, v in saver.__dict__.items() if k not in ("folder", "history_log")}
    log_fields = {k: v for k, v in saver.history_log.__dict__.items() if k != "path"}
    return Boundary(trainer, saver, template, fields, log_fields, expect, done)


def boundary_check(
    boundary: Boundary, scratch: Path, *, then_save: bool, done: bool = False
) -> Callable[[World], list[str]]:
    """The core check for a world left by a fault at a boundary: a restart finds `last` and
    `best` verifiable at once and at least as new as before (as new as the boundary itself, if
    `done`); with `then_save`, a restart that saves again leaves nothing temporary or stale."""
    counter = iter(range(1_000_000))
    expect = boundary.expect_done if done else boundary.expect

    def check(world: World) -> list[str]:
        folder = materialize(world, scratch / f"world-{next(counter)}")
        problems = restart_problems(folder, expect)
        if then_save and not problems:
            saver = Checkpoint(folder, every=BOUNDARY_EVERY, keep=BOUNDARY_KEEP)
            saver.on_fit_start(boundary.trainer)
            try:
                saver.save(boundary.trainer, (LAST,))
            except CheckpointError as err:
                problems.append(f"the restart's save failed: {err}")
            problems += leftovers(folder, BOUNDARY_KEEP)
        shutil.rmtree(folder)
        return problems

    return check
