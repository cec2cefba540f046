"""Policy, fired by the Trainer at named events: early stopping, checkpoints, stop conditions."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from resume_lab import state_keys as keys
from resume_lab.checkpoint import (
    CheckpointError,
    fsync_dir,
    load_checkpoint,
    manifest_path,
    remove_stale_temp_files,
    temp_path,
)
from resume_lab.loop import EARLY_STOPPING, STOP_AFTER, TIME_BUDGET
from resume_lab.resume import save_training

if TYPE_CHECKING:
    from resume_lab.loop import Trainer


class Callback:
    """Every event the Trainer emits, in the order it emits them within one update.

    A callback with a `state_key` has its state_dict() saved in every checkpoint and
    restored on resume: policy that counts (patience, schedules) must survive a restart.
    """

    state_key: str | None = None

    def on_fit_start(self, trainer: Trainer) -> None: ...
    def on_step_end(self, trainer: Trainer) -> None: ...  # after optimizer.step(); history written
    def on_eval_end(self, trainer: Trainer, metrics: dict[str, float]) -> None: ...
    def on_boundary(self, trainer: Trainer) -> None: ...  # end of the update: the place to save
    def on_fit_end(self, trainer: Trainer, reason: str) -> None: ...

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass


# --8<-- [start:early_stopping]
class EarlyStopping(Callback):
    """Stop when validation accuracy has not improved for `patience` evaluations."""

    state_key = "early_stopping"

    def __init__(self, patience: int) -> None:
        self.patience = patience
        self.best = -1.0  # accuracy is never negative: the first evaluation always improves
        self.best_step = 0
        self.bad = 0  # evaluations since the last improvement

    def on_fit_start(self, trainer: Trainer) -> None:
        if self.bad >= self.patience:  # resumed from a run that had already stopped
            trainer.request_stop(EARLY_STOPPING)

    def on_eval_end(self, trainer: Trainer, metrics: dict[str, float]) -> None:
        if metrics["val_accuracy"] > self.best:
            self.best, self.best_step, self.bad = metrics["val_accuracy"], trainer.step, 0
        else:
            self.bad += 1
        if self.bad >= self.patience:
            trainer.request_stop(EARLY_STOPPING)

    # Without these two, a resumed run would restart its patience from zero.
    def state_dict(self) -> dict[str, Any]:
        return {"best": self.best, "best_step": self.best_step, "bad": self.bad}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.best, self.best_step, self.bad = state["best"], state["best_step"], state["bad"]


# --8<-- [end:early_stopping]


def publish(source: Path, target: Path) -> None:
    """Make `target` name the same bytes as `source`, atomically (a hard link, else a copy)."""
    tmp = temp_path(target)
    tmp.unlink(missing_ok=True)
    try:
        try:
            os.link(source, tmp)  # no second write; the data was fsynced when it was saved
        except OSError:
            shutil.copyfile(source, tmp)  # a filesystem without hard links
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
        os.replace(tmp, target)
        fsync_dir(target.parent)
    finally:
        tmp.unlink(missing_ok=True)


# --8<-- [start:checkpoint_callback]
def snapshot_step(path: Path) -> int:
    """step-000040.pt -> 40 (numeric, so step 1000000 sorts after step 999999)."""
    return int(path.stem.removeprefix("step-"))


class Checkpoint(Callback):
    """Save every `every` updates and when a run stops; keep the last `keep` and the best.

    Files in `folder`: step-NNNNNN.pt (the last `keep` saves), last.pt (the newest, what a
    restart resumes from), best.pt (highest validation accuracy), each with its .json manifest.
    """

    state_key = "checkpoint"

    def __init__(
        self,
        folder: str | os.PathLike[str],
        every: int,
        keep: int = 3,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.folder = Path(folder)
        self.every, self.keep = every, keep
        self.log = log or (lambda message: None)
        self.best = -1.0
        self.best_step: int | None = None
        self.last_saved_step: int | None = None
        self._best_is_new = False

    def on_fit_start(self, trainer: Trainer) -> None:
        for stale in remove_stale_temp_files(self.folder):  # left by a save that was killed
            self.log(f"removed {stale.name}, left by an interrupted save")

    def on_eval_end(self, trainer: Trainer, metrics: dict[str, float]) -> None:
        if metrics["val_accuracy"] > self.best:
            self.best, self.best_step = metrics["val_accuracy"], trainer.step
            self._best_is_new = True

    def on_boundary(self, trainer: Trainer) -> None:
        if trainer.step % self.every == 0:
            self.save(trainer)
        if self._best_is_new:
            self._best_is_new = False
            save_training(trainer, self.folder / "best.pt")

    def on_fit_end(self, trainer: Trainer, reason: str) -> None:
        # Preempted or finished: either way a restart must find this exact state in last.pt.
        if self.last_saved_step != trainer.step:
            self.save(trainer)

    def save(self, trainer: Trainer) -> None:
        self.last_saved_step = trainer.step  # set first: the saved state must include it
        snapshot = self.folder / f"step-{trainer.step:06d}.pt"
        save_training(trainer, snapshot)
        state, _ = load_checkpoint(snapshot)  # reload once: an unloaded checkpoint is a hope
        if state[keys.STEP] != trainer.step:
            raise CheckpointError(
                f"{snapshot}: reloaded step {state['step']}, saved {trainer.step}"
            )
        # Two renames: if the process dies between them, last.pt and last.json disagree, a
        # restart refuses them by digest, and the complete step-NNNNNN.pt pair is still here.
        publish(snapshot, self.folder / "last.pt")
        publish(manifest_path(snapshot), self.folder / "last.json")
        for old in sorted(self.folder.glob("step-*.pt"), key=snapshot_step)[: -self.keep]:
            old.unlink()
            manifest_path(old).unlink(missing_ok=True)

    # --8<-- [end:checkpoint_callback]

    def state_dict(self) -> dict[str, Any]:
        return {
            "best": self.best,
            "best_step": self.best_step,
            "last_saved_step": self.last_saved_step,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.best, self.best_step = state["best"], state["best_step"]
        self.last_saved_step = state["last_saved_step"]


class StopAfter(Callback):
    """Simulate a preemption after `updates` updates in this process (train --stop-after)."""

    def __init__(self, updates: int) -> None:
        self.updates = updates
        self.first_step = 0

    def on_fit_start(self, trainer: Trainer) -> None:
        self.first_step = trainer.step

    def on_boundary(self, trainer: Trainer) -> None:
        if trainer.step - self.first_step >= self.updates:
            trainer.request_stop(STOP_AFTER)


# --8<-- [start:time_budget]
class TimeBudget(Callback):
    """Stop at an update boundary while there is still time for the last save."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self.clock = clock
        self.started = clock()  # the budget counts from start-up, not from the first update
        self._previous = self.started

    def on_fit_start(self, trainer: Trainer) -> None:
        self._previous = self.clock()  # the first update's duration excludes start-up

    def on_boundary(self, trainer: Trainer) -> None:
        now = self.clock()
        last_update = now - self._previous
        self._previous = now
        if now - self.started + last_update >= self.seconds:  # the next update would overrun
            trainer.request_stop(TIME_BUDGET)


# --8<-- [end:time_budget]
