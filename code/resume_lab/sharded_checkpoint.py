"""Sharded checkpoints: torch.distributed.checkpoint writes every rank's
pieces into a fresh temporary directory; rank 0 adds the replicated state
and the manifest (every file with its size and hash) and commits the
directory with one rename, as for one process.

DCP alone has no checksum, overwrites in place by default (a rank killed
while overwriting a good checkpoint leaves a silent mix of old and new
tensors) and unpickles `.metadata` freely; here none of that can happen:
a directory is never written twice, nothing is loaded before the manifest
vouches for it, and the metadata goes through an allow-list.
"""

from __future__ import annotations

import json
import os
import pickle
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import CheckpointException, FileSystemWriter
from torch.distributed.checkpoint.state_dict import (
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)

from resume_lab import state_keys as keys
from resume_lab.atomic import SaveError, fsync_dir, write_synced
from resume_lab.checkpoint import (
    TEMP_PREFIX,
    first_line,
    locate,
    replace_existing,
    verify,
)
from resume_lab.hashing import DEFAULT_HASH, file_digest
from resume_lab.history_log import HISTORY_LOG, HistoryLog, read_history
from resume_lab.manifest import (
    MANIFEST,
    CheckpointError,
    make_manifest,
    read_manifest,
    write_manifest,
)
from resume_lab.resume import ConfigMismatchError
from resume_lab.run_folder import checkpoint_name
from resume_lab.safe_metadata import (
    METADATA,
    SafeReader,
    TensorOnlyPlanner,
    read_metadata,
)
from resume_lab.sharded import ShardedTrainer
from resume_lab.shards import check_divisible, shard_key, world_sizes_for
from resume_lab.versions import versions

# the state every rank holds alike, written once by rank 0
REPLICATED_FILE = "train_state.pt"
SHARDS = "shards"  # L, fixed at the first start
SHARD_RNG = "shard_rng"  # {shard-NNNN: generator state}: per-shard keys
OPTIMIZER_GROUPS = "optimizer_groups"  # lr, betas, ...: not tensors
REPLICATED_KEYS = (
    keys.FORMAT,
    keys.STEP,
    SHARDS,
    OPTIMIZER_GROUPS,
    keys.SCHEDULER,
    keys.SAMPLER,
    keys.DATA_POSITION,
    keys.CALLBACKS,
    keys.HISTORY,
    keys.CONFIG,
)


def is_sharded(checkpoint: Path) -> bool:
    return (checkpoint / REPLICATED_FILE).exists()


# --8<-- [start:sharded_state]
def tensor_state(trainer: ShardedTrainer) -> dict[str, Any]:
    """What DCP writes: tensors only, each rank its own pieces. Per-shard
    state goes under per-shard keys."""
    optimizer = get_optimizer_state_dict(trainer.model, trainer.optimizer)
    return {
        keys.MODEL: get_model_state_dict(trainer.model),
        keys.OPTIMIZER: optimizer["state"],
        SHARD_RNG: {shard_key(s): trainer.rng.states[s] for s in trainer.owned},
    }


def replicated_state(
    trainer: ShardedTrainer, history_mark: dict[str, Any]
) -> dict[str, Any]:
    """What every rank holds alike: written by rank 0, loaded with
    weights_only=True."""
    optimizer = get_optimizer_state_dict(trainer.model, trainer.optimizer)
    return {
        keys.FORMAT: keys.FORMAT_VERSION,
        keys.STEP: trainer.step,
        SHARDS: trainer.shards,
        OPTIMIZER_GROUPS: optimizer["param_groups"],
        keys.SCHEDULER: trainer.scheduler.state_dict(),
        keys.SAMPLER: trainer.sampler.state_dict(),
        **trainer.clocks.state_dict(),
        keys.CALLBACKS: {
            cb.state_key: cb.state_dict()
            for cb in trainer.callbacks
            if cb.state_key
        },
        keys.HISTORY: history_mark,
        keys.CONFIG: trainer.config.to_dict(),
        keys.VERSIONS: versions(),
    }


# --8<-- [end:sharded_state]


@dataclass
class PendingSave:
    """A checkpoint being written: committed only once every rank's pieces
    are on disk."""

    trainer_step: int
    tmp: Path
    target: Path
    replicated: dict[str, Any] | None  # rank 0 only
    future: Any = None  # dcp.async_save's, if asynchronous

    def wait(self) -> None:
        if self.future is not None:
            self.future.result()
            self.future = None

    @property
    def written(self) -> bool:
        return self.future is None or self.future.done()


# --8<-- [start:start_save]
def start_save(
    trainer: ShardedTrainer,
    folder: Path,
    *,
    log: HistoryLog | None,
    asynchronous: bool = False,
    async_group: Any = None,
) -> PendingSave:
    """Every rank: write its pieces into a temporary directory that rank 0
    named (never an existing checkpoint: overwrite=False)."""
    world = trainer.world
    name = checkpoint_name(trainer.step)
    tmp = Path(
        world.broadcast(
            str(folder / f"{TEMP_PREFIX}{name}-{secrets.token_hex(4)}")
        )
    )
    replicated = None
    if world.is_writer:
        tmp.mkdir()
        mark = (log or HistoryLog(folder / HISTORY_LOG)).sync(trainer.history)
        replicated = replicated_state(trainer, mark)
    world.barrier()  # the directory exists before any rank writes into it
    writer = FileSystemWriter(tmp, overwrite=False)
    pending = PendingSave(trainer.step, tmp, folder / name, replicated)
    if asynchronous:
        # the state is staged (copied) before async_save returns: training
        # may change the live tensors from here on
        pending.future = dcp.async_save(
            tensor_state(trainer),
            storage_writer=writer,
            process_group=async_group,
        )
    else:
        dcp.save(tensor_state(trainer), storage_writer=writer)
    return pending


# --8<-- [end:start_save]


# --8<-- [start:commit_sharded]
def commit(pending: PendingSave, config: dict[str, Any]) -> Path:
    """Rank 0, once every rank's pieces are written (dcp.save returned, or
    the async future is done: DCP writes .metadata only after every rank
    reported): the replicated state, the manifest last, one rename."""
    pending.wait()
    tmp, target = pending.tmp, pending.target
    assert pending.replicated is not None, "only rank 0 commits"
    try:
        write_synced(pending.replicated, tmp / REPLICATED_FILE)
        digests = {
            path.name: file_digest(path, DEFAULT_HASH)
            for path in sorted(tmp.iterdir())
        }
        manifest = make_manifest(
            digests,
            step=pending.trainer_step,
            config=config,
            algorithm=DEFAULT_HASH,
        )
        write_manifest(tmp / MANIFEST, manifest)  # last: the commit record
        fsync_dir(tmp)
        if target.exists() and same_pieces(target, manifest):
            pass  # a bitwise resume committed it already: keep it
        elif target.exists():
            replace_existing(target, tmp, manifest)
        else:
            os.rename(tmp, target)  # the commit
        fsync_dir(target.parent)
    except OSError as err:
        raise SaveError(target, err) from err
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


# --8<-- [end:commit_sharded]


def same_pieces(target: Path, manifest: dict[str, Any]) -> bool:
    """The committed `target` holds the same bytes as the new commit, apart
    from DCP's .metadata, which records a random save id and the temporary
    path and so differs on every save."""
    try:
        committed_files = dict(read_manifest(target)["files"])
    except CheckpointError:
        return False
    new_files = dict(manifest["files"])
    committed_files.pop(METADATA, None)
    new_files.pop(METADATA, None)
    return committed_files == new_files


def load_replicated(checkpoint: Path) -> dict[str, Any]:
    """The replicated state, after every file of the checkpoint matched its
    manifest; weights_only=True."""
    manifest = verify(checkpoint)
    path = checkpoint / REPLICATED_FILE
    with open(path, "rb") as f:
        try:
            state = torch.load(f, weights_only=True, map_location="cpu")
        except (pickle.UnpicklingError, RuntimeError) as err:
            # a digest only proves "unchanged since the manifest"
            raise CheckpointError(
                f"{path}: matches its manifest but cannot be loaded "
                f"safely: {first_line(err)}"
            ) from None
    missing = [
        key
        for key in REPLICATED_KEYS
        if not isinstance(state, dict) or key not in state
    ]
    if missing:
        raise CheckpointError(
            f"{path}: not a training state, it lacks {', '.join(missing)}"
        )
    if state[keys.STEP] != manifest[keys.STEP]:
        raise CheckpointError(
            f"{checkpoint}: the manifest says update {manifest[keys.STEP]}, "
            f"the state {state[keys.STEP]}"
        )
    return state


def saved_state(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The verified replicated state of a sharded checkpoint (its L is
    state[SHARDS]); None for a one-process checkpoint. Pass it on to
    resume_sharded, which then does not hash every file a second time."""
    checkpoint = locate(path)
    if not checkpoint.is_dir() or not is_sharded(checkpoint):
        return None
    return load_replicated(checkpoint)


# --8<-- [start:resume_sharded]
def resume_sharded(
    trainer: ShardedTrainer,
    path: str | os.PathLike[str],
    *,
    restore_rng: bool = True,
    state: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Every rank: verify (unless `state` is saved_state()'s), then load its
    pieces of a checkpoint saved at any world size whose L it divides.
    restore_rng=False: the demo's negative control."""
    checkpoint = locate(path)
    state = state if state is not None else load_replicated(checkpoint)
    differences = trainer.config.differences(state[keys.CONFIG])
    if differences:
        raise ConfigMismatchError(
            f"{path} was made with another configuration: {'; '.join(differences)}"
        )
    if state[SHARDS] != trainer.shards:
        raise CheckpointError(
            f"{path} was made with {state[SHARDS]} logical shards, this run "
            f"has {trainer.shards}"
        )
    check_divisible(trainer.shards, trainer.world.size)
    pieces = tensor_state(trainer)  # templates: shapes and placements
    if not restore_rng:
        # dcp.load fills the templates in place, and these templates are
        # the generators' own state tensors: leaving them out of the
        # request is what keeps the fresh seeds
        del pieces[SHARD_RNG]
    # refused here, on every rank alike, before DCP reads anything; inside
    # dcp.load the same refusal would arrive wrapped in CheckpointException,
    # a BaseException that `except Exception` handlers miss
    read_metadata(checkpoint / METADATA)
    try:
        dcp.load(
            pieces,
            storage_reader=SafeReader(checkpoint),
            planner=TensorOnlyPlanner(),
        )
    except CheckpointException as err:
        raise CheckpointError(
            f"{checkpoint}: DCP could not load it: {err}"
        ) from None
    set_model_state_dict(trainer.model, pieces[keys.MODEL])
    set_optimizer_state_dict(
        trainer.model,
        trainer.optimizer,
        {
            "state": pieces[keys.OPTIMIZER],
            "param_groups": state[OPTIMIZER_GROUPS],
        },
    )
    if restore_rng:
        for shard in trainer.owned:
            key = shard_key(shard)
            trainer.rng.states[shard] = pieces[SHARD_RNG][key]
    trainer.scheduler.load_state_dict(state[keys.SCHEDULER])
    trainer.sampler.load_state_dict(state[keys.SAMPLER])
    trainer.clocks.load_state_dict(state)
    trainer.history = read_history(
        checkpoint.parent / HISTORY_LOG, state[keys.HISTORY]
    )
    for callback in trainer.callbacks:
        if callback.state_key is not None:
            callback.load_state_dict(state[keys.CALLBACKS][callback.state_key])
    return state


# --8<-- [end:resume_sharded]


def describe_sharded(checkpoint: Path) -> list[str]:
    """What a verified sharded checkpoint holds, read without unpickling
    anything outside the allow-list."""
    state = load_replicated(checkpoint)
    metadata = read_metadata(checkpoint / METADATA)
    items = metadata.state_dict_metadata
    position = state[keys.DATA_POSITION]
    shard_files = sorted(p.name for p in checkpoint.glob("*.distcp"))
    return [
        f"  step {state[keys.STEP]}; data position: epoch "
        f"{position['epoch']}, micro-batch {position['micro']}, "
        f"{position['examples_seen']:,} examples seen",
        f"  {state[SHARDS]} logical shards, written by {len(shard_files)} "
        f"rank(s): {', '.join(shard_files)}",
        f"  DCP metadata: {len(items)} tensor items, none pickled; "
        f"resumable at world sizes "
        f"{', '.join(map(str, world_sizes_for(state[SHARDS])))}",
        f"  callbacks: {json.dumps(state[keys.CALLBACKS])}",
        f"  history: {state[keys.HISTORY]['records']} updates",
    ]
