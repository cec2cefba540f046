"""Policy, fired by the Trainer at named events: early stopping, checkpoints,
stop conditions."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from resume_lab import state_keys as keys
from resume_lab.checkpoint import CheckpointError
from resume_lab.events import (
    EARLY_STOPPING,
    STOP_AFTER,
    TIME_BUDGET,
    Callback,
    StopReason,
)
from resume_lab.history_log import HISTORY_LOG, HistoryLog
from resume_lab.loop import Trainer
from resume_lab.resume import (
    PendingSave,
    finish_save,
    read_checkpoint,
    start_save,
    store_for,
)
from resume_lab.run_folder import (
    BEST,
    LAST,
    checkpoint_name,
    clean_start,
    point,
    pointed,
    rotate,
)
from resume_lab.state_file import Store


# --8<-- [start:early_stopping]
class EarlyStopping(Callback):
    """Stop when validation accuracy has not improved for `patience`
    evaluations."""

    state_key = "early_stopping"

    def __init__(self, patience: int) -> None:
        self.patience = patience
        # accuracy is never negative: the first evaluation always improves
        self.best = -1.0
        self.best_step = 0
        self.bad = 0  # evaluations since the last improvement

    def on_fit_start(self, trainer: Trainer) -> None:
        # resumed from a run that had already stopped
        if self.bad >= self.patience:
            trainer.request_stop(EARLY_STOPPING)

    def on_eval_end(self, trainer: Trainer, metrics: dict[str, float]) -> None:
        if metrics["val_accuracy"] > self.best:
            self.best, self.best_step, self.bad = (
                metrics["val_accuracy"],
                trainer.step,
                0,
            )
        else:
            self.bad += 1
        if self.bad >= self.patience:
            trainer.request_stop(EARLY_STOPPING)

    # Without these two, a resumed run would restart its patience from zero.
    def state_dict(self) -> dict[str, Any]:
        return {"best": self.best, "best_step": self.best_step, "bad": self.bad}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.best, self.best_step, self.bad = (
            state["best"],
            state["best_step"],
            state["bad"],
        )


# --8<-- [end:early_stopping]


# --8<-- [start:checkpoint_callback]
class Checkpoint(Callback):
    """Commit a checkpoint every `every` updates, at each new best and when
    a run stops; `last` names the newest, `best` the best. The store is
    the one-file store for one process, DCP for logical shards; with W
    ranks, every rank writes, rank 0 commits and moves the pointers.
    `asynchronous` (DCP only): training goes on while the store writes,
    and the commit waits until the write has finished."""

    state_key = "checkpoint"

    def __init__(
        self,
        folder: str | os.PathLike[str],
        every: int,
        keep: int = 3,
        log: Callable[[str], None] | None = None,
        *,
        asynchronous: bool = False,
    ) -> None:
        if every < 1 or keep < 1:
            raise ValueError(
                f"Checkpoint(every={every}, keep={keep}): both must be 1 or "
                "more (keep=1 keeps the newest, plus what a pointer names)"
            )
        self.folder = Path(folder)
        self.every, self.keep = every, keep
        self.log = log or (lambda message: None)
        self.asynchronous = asynchronous
        self.best = -1.0
        self.best_step: int | None = None
        self.last_saved_step: int | None = None
        self._best_is_new = False
        self.history_log = HistoryLog(self.folder / HISTORY_LOG)
        self._current: Path | None = None  # holds the state as it is now
        self.store: Store | None = None  # chosen at the start: by the trainer
        self.pending: PendingSave | None = None  # one write in flight
        self.pending_pointers: tuple[str, ...] = ()

    def on_fit_start(self, trainer: Trainer) -> None:
        if trainer.world.is_writer:
            self.folder.mkdir(parents=True, exist_ok=True)
            for line in clean_start(self.folder):  # from killed saves
                self.log(line)
        trainer.world.barrier()  # nobody writes before the folder is clean
        self.store = store_for(trainer, asynchronous=self.asynchronous)
        last = pointed(self.folder, LAST)
        if last is not None and last.name == checkpoint_name(trainer.step):
            self._current = last  # resumed: no need to save this state again

    def on_eval_end(self, trainer: Trainer, metrics: dict[str, float]) -> None:
        if metrics["val_accuracy"] > self.best:
            self.best, self.best_step = metrics["val_accuracy"], trainer.step
            self._best_is_new = True

    def on_boundary(self, trainer: Trainer) -> None:
        if self.pending is not None and self.pending.written:
            self.finish(trainer)  # a background write done: commit it now
        best, self._best_is_new = self._best_is_new, False
        if best or trainer.step % self.every == 0:
            # `last` names every save, `best` moves first: the state that
            # `last` will name says which update is best, so that
            # checkpoint must be named by then.
            self.save(trainer, (BEST, LAST) if best else (LAST,))

    # --8<-- [end:checkpoint_callback]

    # --8<-- [start:checkpoint_save]
    def on_fit_end(self, trainer: Trainer, reason: StopReason) -> None:
        # Preempted or done: a restart must find this exact state in `last`.
        self.finish(trainer)
        current = self._current
        if current is None or current.name != checkpoint_name(trainer.step):
            self.save(trainer, (LAST,))  # else `last` names this state already
        self.finish(trainer)
        trainer.world.barrier()  # `last` is committed before any rank exits

    def save(self, trainer: Trainer, pointers: tuple[str, ...]) -> None:
        if LAST in pointers:
            self.last_saved_step = trainer.step  # first: the save includes it
        self.finish(trainer)  # one write in flight at a time
        self.pending = start_save(
            trainer, self.folder, log=self.history_log, store=self.store
        )
        self.pending_pointers = pointers
        self._current = self.pending.target
        if self.pending.written:
            self.finish(trainer)

    def finish(self, trainer: Trainer) -> None:
        """Wait for the write in flight; rank 0 commits it, loads it back,
        moves its pointers (each swap is one rename) and rotates."""
        pending, self.pending = self.pending, None
        checkpoint = finish_save(pending) if pending is not None else None
        if pending is None or checkpoint is None:
            return
        # an unloaded checkpoint is a hope: every file verified, the state
        # file loaded, before a pointer names it
        saved = read_checkpoint(checkpoint)
        if saved.state[keys.STEP] != pending.step:
            raise CheckpointError(
                f"{checkpoint}: reloaded step {saved.state[keys.STEP]}, "
                f"saved {pending.step}"
            )
        for pointer in self.pending_pointers:
            point(self.folder, pointer, checkpoint)
        rotate(self.folder, self.keep)

    # --8<-- [end:checkpoint_save]

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
    """Simulate a preemption after `updates` updates in this process
    (train --stop-after)."""

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
    """Stop at the first update boundary from which one more update, as
    long as the last, would reach the budget; the save is not budgeted."""

    def __init__(
        self, seconds: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.seconds = seconds
        self.clock = clock
        # the budget counts from start-up, not from the first update
        self.started = clock()
        self._previous = self.started

    def on_fit_start(self, trainer: Trainer) -> None:
        # the first update's duration excludes start-up
        self._previous = self.clock()

    def on_boundary(self, trainer: Trainer) -> None:
        now = self.clock()
        last_update = now - self._previous
        self._previous = now
        # the next update would overrun
        if now - self.started + last_update >= self.seconds:
            trainer.request_stop(TIME_BUDGET)


# --8<-- [end:time_budget]
