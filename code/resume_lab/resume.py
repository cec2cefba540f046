"""What a checkpoint holds, how a save writes it, and the order in which a
resume puts it back: one description for one process and for W.

What differs is the store: the one-file store (file_store.py) for one
process, the DCP store (dcp_store.py) for a trainer on logical shards. A
store says how the model and optimizer are read and put back and which
files hold them; everything else is here, once.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from resume_lab import state_keys as keys
from resume_lab.checkpoint import (
    CheckpointError,
    commit,
    discarded_on_failure,
    locate,
)
from resume_lab.file_store import FileStore
from resume_lab.hashing import FileDigest
from resume_lab.history_log import HistoryLog, read_history
from resume_lab.loop import Trainer
from resume_lab.run_files import (
    HISTORY_LOG,
    LAST,
    REPLICATED_FILE,
    checkpoint_name,
    temporary_name,
)
from resume_lab.run_folder import point
from resume_lab.state_file import Saved, Store
from resume_lab.versions import versions

if TYPE_CHECKING:
    from resume_lab.dcp_store import DcpStore


class ConfigMismatchError(CheckpointError):
    """The checkpoint was made with other settings: resuming it would be
    another experiment."""


def dcp_store() -> type[DcpStore]:
    """The DCP store, imported when first needed: a one-process run never
    loads torch.distributed.checkpoint (seconds of imports it would not
    use)."""
    from resume_lab.dcp_store import DcpStore

    return DcpStore


def store_for(trainer: Trainer, *, asynchronous: bool = False) -> Store:
    """The one-file store for one process; DCP for logical shards."""
    if trainer.shards is None:
        return FileStore()
    return dcp_store()(trainer.world, asynchronous=asynchronous)


def read_checkpoint(path: str | os.PathLike[str]) -> Saved:
    """The checkpoint `path` names, verified (every file's size and hash)
    and its state file loaded with weights_only=True, by the store whose
    files it holds."""
    checkpoint = locate(path)
    sharded = checkpoint.is_dir() and (checkpoint / REPLICATED_FILE).exists()
    store = dcp_store()() if sharded else FileStore()
    return store.read(checkpoint)


def stateful_callbacks(trainer: Trainer) -> dict[str, Any]:
    """The trainer's callbacks that have a state_key, by that key. Two with
    the same key are refused: one's state would overwrite the other's."""
    found: dict[str, Any] = {}
    for cb in trainer.callbacks:
        if cb.state_key in found:
            raise ValueError(
                f"two callbacks have state_key {cb.state_key!r}: "
                f"{type(found[cb.state_key]).__name__} and "
                f"{type(cb).__name__}; give one a distinct state_key"
            )
        if cb.state_key:
            found[cb.state_key] = cb
    return found


# --8<-- [start:training_state]
def training_state(
    trainer: Trainer,
    history_mark: dict[str, Any],
    store: Store | None = None,
) -> dict[str, Any]:
    """Everything update `step + 1` depends on, as tensors, containers and
    primitives only. The store reads the model and optimizer (their
    state_dict(), or each rank's pieces of them). The per-update records
    stay in the run folder's log; the checkpoint holds the mark of how much
    of it is its own."""
    store = store or store_for(trainer)
    return {
        keys.FORMAT: keys.FORMAT_VERSION,
        **trainer.clocks.state_dict(),  # STEP and DATA_POSITION
        **store.weights(trainer),  # MODEL and OPTIMIZER
        keys.SCHEDULER: trainer.scheduler.state_dict(),
        keys.SCALER: None,
        keys.SAMPLER: trainer.sampler.state_dict(),
        # the process's generators, or one per logical shard
        keys.RNG: trainer.rng.state_dict(),
        keys.CALLBACKS: {
            key: cb.state_dict()
            for key, cb in stateful_callbacks(trainer).items()
        },
        keys.HISTORY: history_mark,
        keys.CONFIG: trainer.config.to_dict(),
        keys.VERSIONS: versions(),
    }


# --8<-- [end:training_state]


@dataclass
class PendingSave:
    """A checkpoint being written into `tmp`: committed as `target` once
    every rank's files are on disk."""

    step: int
    tmp: Path
    target: Path
    config: dict[str, Any]
    writer: bool  # rank 0, which commits
    digests: dict[str, FileDigest]  # what was hashed while written
    volatile: frozenset[str]
    future: Any = None  # an asynchronous write's: done(), result()

    @property
    def written(self) -> bool:
        return self.future is None or self.future.done()


# --8<-- [start:start_save]
def start_save(
    trainer: Trainer,
    folder: str | os.PathLike[str],
    *,
    log: HistoryLog | None = None,
    store: Store | None = None,
) -> PendingSave:
    """Every rank: write the training state into a temporary directory
    that rank 0 named, never into an existing checkpoint. The history log
    is appended and synced first: a committed checkpoint never names
    records that are not on disk."""
    world, store = trainer.world, store or store_for(trainer)
    folder = Path(folder)
    target = folder / checkpoint_name(trainer.step)
    tmp = Path(world.broadcast(str(folder / temporary_name(target.name))))
    mark: dict[str, Any] = {}
    with discarded_on_failure(tmp, target):
        if world.is_writer:  # rank 0 writes the run folder's shared files
            mark = (log or HistoryLog(folder / HISTORY_LOG)).sync(
                trainer.history
            )
            tmp.mkdir()
        world.barrier()  # the directory exists before any rank writes
        state = training_state(trainer, mark, store)
        digests, future = store.write(trainer, state, tmp)
    config = trainer.config.to_dict()
    writer, volatile = world.is_writer, store.volatile
    return PendingSave(
        trainer.step, tmp, target, config, writer, digests, volatile, future
    )


def finish_save(pending: PendingSave) -> Path | None:
    """Wait until every rank's files are written (DCP writes .metadata only
    after every rank reported), then rank 0 commits them: the checkpoint on
    rank 0, None on the others."""
    with discarded_on_failure(pending.tmp, pending.target):
        if pending.future is not None:
            pending.future.result()
    if not pending.writer:
        return None
    return commit(
        pending.tmp,
        pending.target,
        pending.digests,
        step=pending.step,
        config=pending.config,
        volatile=pending.volatile,
    )


# --8<-- [end:start_save]


# --8<-- [start:save_training]
def save_training(
    trainer: Trainer,
    folder: str | os.PathLike[str],
    *,
    log: HistoryLog | None = None,
    pointers: tuple[str, ...] = (LAST,),
) -> Path:
    """Commit the training state as `folder/step-NNNNNN/` and point
    `pointers` at it; returns the checkpoint directory, on every rank once
    it is committed."""
    folder = Path(folder)
    if trainer.world.is_writer:
        folder.mkdir(parents=True, exist_ok=True)
    pending = start_save(trainer, folder, log=log)
    checkpoint = finish_save(pending)
    if checkpoint is not None:  # rank 0
        for pointer in pointers:
            point(folder, pointer, checkpoint)
    trainer.world.barrier()  # committed before any rank reads it
    return pending.target


# --8<-- [end:save_training]


# --8<-- [start:resume]
def resume(
    trainer: Trainer,
    path: str | os.PathLike[str] | Saved,
    *,
    restore_rng_state: bool = True,
) -> dict[str, Any]:
    """Load a verified checkpoint into a freshly built `trainer`; returns the
    manifest. `path` is a run folder (its `last`), a pointer, a checkpoint
    directory, or what read_checkpoint() returned for one; the history log
    is read from the folder that holds it.

    `trainer` was built the way a new process builds it (its own init seed,
    fresh objects), on the checkpoint's logical shards if it has any. Every
    piece of state is overwritten from the file; the RNG goes last.
    """
    # every file's size and hash first, then weights_only=True
    saved = path if isinstance(path, Saved) else read_checkpoint(path)
    state, where = saved.state, saved.checkpoint
    differences = trainer.config.differences(state[keys.CONFIG])
    if differences:
        raise ConfigMismatchError(
            f"{where} was made with another configuration: "
            f"{'; '.join(differences)}"
        )
    if state.get(keys.SHARDS) != trainer.shards:
        raise CheckpointError(
            f"{where} was made with {state.get(keys.SHARDS) or 'no'} logical "
            f"shards, this run has {trainer.shards or 'none'}"
        )
    # the model, then the optimizer's moments and the lr in use: from the
    # state file, or each rank's pieces from DCP's files
    state = saved.store.load_weights(trainer, saved)
    # where the schedule stands
    trainer.scheduler.load_state_dict(state[keys.SCHEDULER])
    # Data order comes from the checkpoint's sampler seed, never from the seed
    # this process was started with; the position is two integers, so nothing
    # is replayed.
    trainer.sampler.load_state_dict(state[keys.SAMPLER])
    trainer.clocks.load_state_dict(state)
    trainer.history = read_history(
        where.parent / HISTORY_LOG, state[keys.HISTORY]
    )
    saved_callbacks = state[keys.CALLBACKS]
    for key, callback in stateful_callbacks(trainer).items():
        if key not in saved_callbacks:
            raise CheckpointError(
                f"{where}: holds no state for the {key!r} callback"
            )
        callback.load_state_dict(saved_callbacks[key])
    # Last: building the objects above drew from the RNG (init); the next
    # draw must be the first dropout mask of update step + 1, exactly as in
    # the run that saved this file.
    if restore_rng_state:
        trainer.rng.load_state_dict(state[keys.RNG])
    return saved.manifest


# --8<-- [end:resume]
