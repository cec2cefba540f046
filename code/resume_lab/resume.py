"""What a checkpoint holds, and the order in which a resume puts it back."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from resume_lab import state_keys as keys
from resume_lab.checkpoint import (
    STATE_FILE,
    CheckpointError,
    load_checkpoint,
    locate,
    save_checkpoint,
)
from resume_lab.history_log import HISTORY_LOG, HistoryLog, read_history
from resume_lab.loop import Trainer
from resume_lab.run_folder import LAST, checkpoint_name, point
from resume_lab.versions import versions


class ConfigMismatchError(CheckpointError):
    """The checkpoint was made with other settings: resuming it would be
    another experiment."""


# --8<-- [start:training_state]
def training_state(
    trainer: Trainer, history_mark: dict[str, Any]
) -> dict[str, Any]:
    """Everything update `step + 1` depends on, as tensors, containers and
    primitives only. The per-update records stay in the run folder's log;
    the checkpoint holds the mark of how much of it is its own."""
    return {
        keys.FORMAT: keys.FORMAT_VERSION,
        **trainer.clocks.state_dict(),  # STEP and DATA_POSITION
        keys.MODEL: trainer.model.state_dict(),
        keys.OPTIMIZER: trainer.optimizer.state_dict(),
        keys.SCHEDULER: trainer.scheduler.state_dict(),
        keys.SCALER: None,
        keys.SAMPLER: trainer.sampler.state_dict(),
        keys.RNG: trainer.rng.state_dict(),
        keys.CALLBACKS: {
            cb.state_key: cb.state_dict()
            for cb in trainer.callbacks
            if cb.state_key
        },
        keys.HISTORY: history_mark,
        keys.CONFIG: trainer.config.to_dict(),
        keys.VERSIONS: versions(),
    }


# --8<-- [end:training_state]


# --8<-- [start:save_training]
def save_training(
    trainer: Trainer,
    folder: str | os.PathLike[str],
    *,
    log: HistoryLog | None = None,
    pointers: tuple[str, ...] = (LAST,),
) -> Path:
    """Commit the training state as `folder/step-NNNNNN/` and point
    `pointers` at it; returns the checkpoint directory.

    The history log is appended and synced first: a committed checkpoint
    never names records that are not on disk.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    log = log or HistoryLog(folder / HISTORY_LOG)
    mark = log.sync(trainer.history)
    checkpoint = save_checkpoint(
        {STATE_FILE: training_state(trainer, mark)},
        folder,
        checkpoint_name(trainer.step),
        step=trainer.step,
        config=trainer.config.to_dict(),
    )
    for pointer in pointers:
        point(folder, pointer, checkpoint)
    return checkpoint


# --8<-- [end:save_training]


# --8<-- [start:resume]
def resume(
    trainer: Trainer,
    path: str | os.PathLike[str],
    *,
    restore_rng_state: bool = True,
) -> dict[str, Any]:
    """Load a verified checkpoint into a freshly built `trainer`; returns the
    manifest. `path` is a run folder (its `last`), a pointer or a checkpoint
    directory; the history log is read from the folder that holds it.

    `trainer` was built the way a new process builds it (its own init seed,
    fresh objects). Every piece of state is overwritten from the file; the RNG
    goes last.
    """
    # every file's size and hash first, then weights_only=True
    checkpoint = locate(path)
    state, manifest = load_checkpoint(checkpoint)
    differences = trainer.config.differences(state[keys.CONFIG])
    if differences:
        raise ConfigMismatchError(
            f"{path} was made with another configuration: "
            f"{'; '.join(differences)}"
        )

    trainer.model.load_state_dict(state[keys.MODEL])
    # moments, and the lr in use
    trainer.optimizer.load_state_dict(state[keys.OPTIMIZER])
    # where the schedule stands
    trainer.scheduler.load_state_dict(state[keys.SCHEDULER])
    # Data order comes from the checkpoint's sampler seed, never from the seed
    # this process was started with; the position is two integers, so nothing
    # is replayed.
    trainer.sampler.load_state_dict(state[keys.SAMPLER])
    trainer.clocks.load_state_dict(state)
    trainer.history = read_history(
        checkpoint.parent / HISTORY_LOG, state[keys.HISTORY]
    )
    saved_callbacks = state[keys.CALLBACKS]
    for callback in trainer.callbacks:
        if callback.state_key is None:
            continue
        if callback.state_key not in saved_callbacks:
            raise CheckpointError(
                f"{path}: holds no state for the "
                f"{callback.state_key!r} callback"
            )
        callback.load_state_dict(saved_callbacks[callback.state_key])
    # Last: building the objects above drew from the RNG (init); the next
    # draw must be the first dropout mask of update step + 1, exactly as in
    # the run that saved this file.
    if restore_rng_state:
        trainer.rng.load_state_dict(state[keys.RNG])
    return manifest


# --8<-- [end:resume]
