"""The DCP store: a Trainer on L logical shards (W processes, or one) keeps
its tensors in torch.distributed.checkpoint's files, each rank its own
pieces, and what every rank holds alike in train_state.pt, which rank 0
writes; rank 0 commits the directory with its manifest and one rename, as
for one process (checkpoint.commit).

DCP alone has no checksum, overwrites in place by default (a rank killed
while overwriting a good checkpoint leaves a silent mix of old and new
tensors) and unpickles `.metadata` freely; here none of that can happen:
a directory is never written twice, nothing is loaded before the manifest
vouches for it, and the metadata goes through an allow-list.

Only a sharded run imports this module (resume.store_for), so a one-process
run never loads torch.distributed.checkpoint.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import CheckpointException, FileSystemWriter
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)

from resume_lab import state_keys as keys
from resume_lab.atomic import write_synced
from resume_lab.checkpoint import CheckpointError, check_contents, unpickle
from resume_lab.checkpoint import verified as verified_files
from resume_lab.hashing import FileDigest
from resume_lab.loop import Trainer
from resume_lab.run_files import (
    METADATA,
    REPLICATED_FILE,
    SHARD_SUFFIX,
)
from resume_lab.safe_metadata import (
    SafeReader,
    TensorOnlyPlanner,
    read_metadata,
)
from resume_lab.shards import world_sizes_for
from resume_lab.state_file import Saved, check_keys
from resume_lab.world import World

# train_state.pt: the state every rank holds alike
REPLICATED_KEYS = (
    keys.FORMAT,
    keys.STEP,
    keys.SHARDS,
    keys.OPTIMIZER_GROUPS,
    keys.SCHEDULER,
    keys.SAMPLER,
    keys.DATA_POSITION,
    keys.CALLBACKS,
    keys.HISTORY,
    keys.CONFIG,
    keys.VERSIONS,
)


# --8<-- [start:dcp_layout]
def tensor_part(state: dict[str, Any]) -> dict[str, Any]:
    """What DCP writes: tensors only, each rank its own pieces. Per-shard
    state goes under per-shard keys."""
    return {
        keys.MODEL: state[keys.MODEL],
        keys.OPTIMIZER: state[keys.OPTIMIZER]["state"],
        keys.SHARD_RNG: state[keys.RNG],
    }


def replicated_part(
    state: dict[str, Any], shards: int | None
) -> dict[str, Any]:
    """What every rank holds alike (L, the optimizer's settings, the clocks,
    the schedule...): train_state.pt, loaded with weights_only=True."""
    groups = state[keys.OPTIMIZER]["param_groups"]
    parts = {**state, keys.SHARDS: shards, keys.OPTIMIZER_GROUPS: groups}
    return {key: parts[key] for key in REPLICATED_KEYS}


# --8<-- [end:dcp_layout]


class DcpStore:
    state_file: str = REPLICATED_FILE
    layout: tuple[str, ...] = REPLICATED_KEYS
    # DCP's .metadata records a random save id and the temporary path: its
    # bytes differ on every save of the same state
    volatile: frozenset[str] = frozenset({METADATA})

    def __init__(
        self, world: World | None = None, *, asynchronous: bool = False
    ) -> None:
        self.asynchronous = asynchronous
        self.group: Any = None
        if asynchronous and world is not None and world.distributed:
            # async_save runs its collectives from a thread: a group of its
            # own (created by every rank alike, as the store is)
            self.group = dist.new_group(backend="gloo")

    def weights(self, trainer: Trainer) -> dict[str, Any]:
        """This rank's pieces of the model and the optimizer, under their
        parameter names (DCP's state-dict API: DDP's and FSDP2's alike)."""
        return {
            keys.MODEL: get_model_state_dict(trainer.model),
            keys.OPTIMIZER: get_optimizer_state_dict(
                trainer.model, trainer.optimizer
            ),
        }

    # --8<-- [start:dcp_write]
    def write(
        self, trainer: Trainer, state: dict[str, Any], tmp: Path
    ) -> tuple[dict[str, FileDigest], Any]:
        """Every rank: its pieces, by DCP, into `tmp`, which holds nothing
        yet (overwrite=False); then rank 0: train_state.pt. Returns what was
        hashed while written, and DCP's future if asynchronous."""
        writer = FileSystemWriter(tmp, overwrite=False)
        future = None
        if self.asynchronous:
            # the state is staged (copied) before async_save returns:
            # training may change the live tensors from here on
            future = dcp.async_save(
                tensor_part(state),
                storage_writer=writer,
                process_group=self.group,
            )
        else:
            dcp.save(tensor_part(state), storage_writer=writer)
        digests = {}
        if trainer.world.is_writer:
            replicated = replicated_part(state, trainer.shards)
            path = tmp / REPLICATED_FILE
            digests[REPLICATED_FILE] = write_synced(replicated, path)
        return digests, future

    # --8<-- [end:dcp_write]

    def read(self, checkpoint: Path) -> Saved:
        """train_state.pt and `.metadata`, each read from the handle that
        was hashed after every file matched the manifest; the metadata
        through the allow-list, refused on every rank alike before DCP
        reads anything."""
        paths = [checkpoint / REPLICATED_FILE, checkpoint / METADATA]
        with verified_files(checkpoint, paths) as (handles, manifest):
            state = unpickle(paths[0], handles[0])
            metadata = read_metadata(paths[1], handles[1].read())
        check_keys(paths[0], state, self.layout)
        check_contents(paths[0], state, manifest)
        return Saved(checkpoint, state, manifest, self, metadata)

    def load_weights(self, trainer: Trainer, saved: Saved) -> dict[str, Any]:
        """Every rank: its pieces (of a checkpoint saved at any world size
        whose L it divides) into the model and the optimizer; returns the
        whole state, the shard generators' states with it."""
        # templates: shapes and placements, which dcp.load fills in place;
        # the generators' are copies, put back only if the resume asks
        rng = {key: t.clone() for key, t in trainer.rng.state_dict().items()}
        templates = tensor_part({**self.weights(trainer), keys.RNG: rng})
        try:
            dcp.load(
                templates,
                storage_reader=SafeReader(saved.checkpoint, saved.metadata),
                planner=TensorOnlyPlanner(),
            )
        except CheckpointException as err:
            # a BaseException, which `except Exception` handlers miss
            raise CheckpointError(
                f"{saved.checkpoint}: DCP could not load it: {err}"
            ) from None
        optimizer = {
            "state": templates[keys.OPTIMIZER],
            "param_groups": saved.state[keys.OPTIMIZER_GROUPS],
        }
        set_model_state_dict(trainer.model, templates[keys.MODEL])
        set_optimizer_state_dict(trainer.model, trainer.optimizer, optimizer)
        return {
            **saved.state,
            keys.MODEL: templates[keys.MODEL],
            keys.OPTIMIZER: optimizer,
            keys.RNG: templates[keys.SHARD_RNG],
        }

    def whole_model(self, trainer: Trainer) -> dict[str, Any]:
        """The weights for final.pt, gathered whole on rank 0 (every rank
        calls it: FSDP2 gathers its pieces); empty on the others."""
        options = StateDictOptions(full_state_dict=True, cpu_offload=True)
        return get_model_state_dict(trainer.model, options=options)

    def describe(self, saved: Saved) -> list[str]:
        shards, items = saved.state[keys.SHARDS], saved.metadata
        rank_files = sorted(
            name
            for name in saved.manifest["files"]
            if name.endswith(SHARD_SUFFIX)
        )
        return [
            f"  {shards} logical shards, written by {len(rank_files)} "
            f"rank(s): {', '.join(rank_files)}",
            f"  DCP metadata: {len(items.state_dict_metadata)} tensor items, "
            "none pickled; resumable at world sizes "
            f"{', '.join(map(str, world_sizes_for(shards)))}",
        ]
