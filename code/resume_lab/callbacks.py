"""Policy, fired by the Trainer at named events: early stopping, checkpoints,
stop conditions."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from resume_lab import state_keys as keys
from resume_lab.checkpoint import (
    CheckpointError,
    SaveError,
    file_digest,
    fsync_dir,
    load_checkpoint,
    manifest_path,
    read_manifest,
    remove_stale_temp_files,
    temp_path,
    verify,
)
from resume_lab.loop import EARLY_STOPPING, STOP_AFTER, TIME_BUDGET
from resume_lab.resume import save_training

if TYPE_CHECKING:
    from resume_lab.loop import Trainer


class Callback:
    """Every event the Trainer emits, in the order it emits them within one
    update.

    A callback with a `state_key` has its state_dict() saved in every
    checkpoint and restored on resume: policy that counts (patience, schedules)
    must survive a restart.
    """

    state_key: str | None = None

    def on_fit_start(self, trainer: Trainer) -> None: ...
    # after optimizer.step(); history written
    def on_step_end(self, trainer: Trainer) -> None: ...
    def on_eval_end(
        self, trainer: Trainer, metrics: dict[str, float]
    ) -> None: ...
    # end of the update: the place to save
    def on_boundary(self, trainer: Trainer) -> None: ...
    def on_fit_end(self, trainer: Trainer, reason: str) -> None: ...

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass


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


def publish(source: Path, target: Path) -> None:
    """Make `target` name the same bytes as `source`, atomically (a hard link,
    else a copy)."""
    tmp = temp_path(target)
    tmp.unlink(missing_ok=True)
    try:
        try:
            # no second write; the data was fsynced when it was saved
            os.link(source, tmp)
        except OSError:
            shutil.copyfile(source, tmp)  # a filesystem without hard links
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
        os.replace(tmp, target)
    except OSError as err:
        raise SaveError(target, err) from err
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(target.parent)


# The names a restart looks for. Each is published from a file saved under a
# name of its own (step-NNNNNN.pt, best-NNNNNN.pt), never written in place.
PUBLISHED = ("last.pt", "best.pt")


def publish_pair(snapshot: Path, target: Path) -> None:
    """Publish a saved checkpoint and its manifest under a fixed name,
    checkpoint first.

    Two renames cannot be one atomic step. A kill between them leaves `target`
    holding the snapshot's bytes beside the previous manifest;
    finish_interrupted_publish() completes that at the next start, because the
    snapshot's own manifest is still in the folder.
    """
    publish(snapshot, target)
    publish(manifest_path(snapshot), manifest_path(target))


def discard(path: Path) -> None:
    """Delete a checkpoint and its manifest, manifest first: a kill in between
    leaves a .pt that the next rotation or start-up still finds, never a
    manifest without its file."""
    manifest_path(path).unlink(missing_ok=True)
    path.unlink(missing_ok=True)


def finish_interrupted_publish(folder: str | os.PathLike[str]) -> list[str]:
    """At start-up, complete a publish_pair() that a kill cut short; returns
    what was done.

    Such a kill leaves NAME.pt holding a numbered snapshot's bytes beside the
    manifest of the previous publish (or none, at the first). If the manifest
    of a staged best-NNNNNN.pt, or of a step-NNNNNN.pt for a later update than
    NAME.json, vouches for NAME.pt's size and SHA-256, it is published as
    NAME.json. Anything else, such as a damaged file or an edited manifest, is
    left for verify() to refuse. Staged best-NNNNNN files, published or not,
    are removed.
    """
    folder = Path(folder)
    done = []
    for target in (folder / name for name in PUBLISHED):
        if not target.is_file():
            continue
        try:
            verify(target)
            continue  # the pair agrees
        except CheckpointError:
            pass
        try:
            previous = (
                read_manifest(target)["step"]
                if manifest_path(target).exists()
                else -1
            )
        except CheckpointError:
            continue  # a damaged manifest is not what a kill leaves
        digest = file_digest(target)
        for manifest in sorted(folder.glob("step-*.json")) + sorted(
            folder.glob("best-*.json")
        ):
            try:
                recorded = json.loads(manifest.read_text("utf8"))
            except (OSError, ValueError):
                continue
            if not isinstance(recorded, dict):
                continue
            # A staged best-NNNNNN.json exists only while its publish runs:
            # proof of a cut.
            staged = manifest.name.startswith("best-")
            if not staged and recorded.get("step", -1) <= previous:
                continue
            if (recorded.get("bytes"), recorded.get("sha256")) == (
                digest.bytes,
                digest.sha256,
            ):
                publish(manifest, manifest_path(target))
                done.append(
                    f"completed the publish of {target.name} "
                    "that a kill interrupted"
                )
                break
    for leftover in sorted(folder.glob("best-*.json")) + sorted(
        folder.glob("best-*.pt")
    ):
        discard(leftover.with_suffix(".pt"))
    return done


# --8<-- [start:checkpoint_callback]
def snapshot_step(path: Path) -> int:
    """step-000040.pt -> 40 (numeric, so step 1000000 sorts after 999999)."""
    return int(path.stem.removeprefix("step-"))


class Checkpoint(Callback):
    """Save every `every` updates and when a run stops; keep the last `keep`
    and the best: step-NNNNNN.pt, last.pt (the newest, what a restart resumes
    from), best.pt (highest validation accuracy), each with a .json manifest."""

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
        for stale in remove_stale_temp_files(self.folder):  # from killed saves
            self.log(f"removed {stale.name}, left by an interrupted save")

    def on_eval_end(self, trainer: Trainer, metrics: dict[str, float]) -> None:
        if metrics["val_accuracy"] > self.best:
            self.best, self.best_step = metrics["val_accuracy"], trainer.step
            self._best_is_new = True

    def on_boundary(self, trainer: Trainer) -> None:
        # best.pt first: the state in last.pt says which update is best, so by
        # the time a restart can resume from it, that update must be on disk.
        if self._best_is_new:
            self._best_is_new = False
            staged = self.folder / f"best-{trainer.step:06d}.pt"  # like last.pt
            save_training(trainer, staged)
            publish_pair(staged, self.folder / "best.pt")
            discard(staged)
        if trainer.step % self.every == 0:
            self.save(trainer)

    def on_fit_end(self, trainer: Trainer, reason: str) -> None:
        # Preempted or done: a restart must find this exact state in last.pt.
        if self.last_saved_step != trainer.step:
            self.save(trainer)

    def save(self, trainer: Trainer) -> None:
        self.last_saved_step = trainer.step  # first: the save must include it
        snapshot = self.folder / f"step-{trainer.step:06d}.pt"
        save_training(trainer, snapshot)
        state, _ = load_checkpoint(snapshot)  # an unloaded checkpoint is a hope
        if state[keys.STEP] != trainer.step:
            raise CheckpointError(
                f"{snapshot}: reloaded step {state['step']}, "
                f"saved {trainer.step}"
            )
        # Two renames: if the process dies between them, last.pt and last.json
        # disagree; the next start completes it from the step-NNNNNN.json.
        publish_pair(snapshot, self.folder / "last.pt")
        snapshots = sorted(self.folder.glob("step-*.pt"), key=snapshot_step)
        for old in snapshots[: -self.keep]:
            discard(old)

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
    """Stop at an update boundary while there is still time for the last
    save."""

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
