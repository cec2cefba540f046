"""The workers behind the Scaling out page's three rules; each runs in every
rank that snippets/gloo_ranks.py starts (or, for W = 1, in this process)."""

from pathlib import Path
from typing import Any

import torch
import torch.distributed.checkpoint as dcp
import torch.nn.functional as F
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
)

from resume_lab.build import build_trainer
from resume_lab.config import LabConfig
from resume_lab.loop import DETERMINISTIC_FIELDS, Trainer
from resume_lab.resume import resume, save_training
from resume_lab.shards import ShardGenerators, owned, shard_slice
from resume_lab.world import World

SEED = 0
MICRO_BATCH = torch.arange(32)  # one micro-batch of example indices


# --8<-- [start:masks]
def dropout_masks(rank: int, world_size: int, shards: int) -> dict[str, Any]:
    """What each shard this rank owns sees of one micro-batch (MICRO_BATCH):
    its examples and the first mask its dropout generator draws; and, for
    contrast, the mask a generator seeded per rank would give."""
    mine = owned(shards, world_size, rank)
    generators = ShardGenerators(SEED, mine)
    by_shard = {}
    for shard in mine:
        examples = shard_slice(MICRO_BATCH, shards, shard)
        with generators.drawing(shard):
            mask = F.dropout(torch.ones(len(examples), 8), 0.5) > 0
        by_shard[shard] = (examples, mask)
    torch.manual_seed(SEED + rank)  # the common per-rank recipe
    per_rank = F.dropout(torch.ones(len(MICRO_BATCH) // world_size, 8), 0.5)
    return {"by_shard": by_shard, "per_rank": per_rank > 0}


# --8<-- [end:masks]


# --8<-- [start:same_key]
def rng_under_keys(rank: int, world_size: int, folder: str) -> dict[str, Any]:
    """Each rank saves its own generator-like state twice: under one key
    shared by all ranks, and under a key of its own; then loads both back."""
    own = torch.full((4,), float(rank))  # stands in for a generator state
    state = {
        "shared": own.clone(),
        "per_shard": {f"shard-{rank:04d}": own.clone()},
    }
    dcp.save(state, checkpoint_id=folder)
    loaded = {
        "shared": torch.zeros(4),
        "per_shard": {f"shard-{rank:04d}": torch.zeros(4)},
    }
    dcp.load(loaded, checkpoint_id=folder)
    return {
        "saved": own,
        "shared": loaded["shared"],
        "per_shard": loaded["per_shard"][f"shard-{rank:04d}"],
    }


# --8<-- [end:same_key]


CONTROL = LabConfig(steps=16, eval_every=0, patience=None)
STOP = 6


def weights(trainer: Trainer) -> dict[str, torch.Tensor]:
    """The whole model, on every rank (no cpu_offload: that keeps it on
    rank 0 only)."""
    options = StateDictOptions(full_state_dict=True)
    return get_model_state_dict(trainer.model, options=options)


def history(trainer: Trainer) -> list[dict[str, Any]]:
    """Every logged number of every update (all but the wall-clock time)."""
    return [{k: r[k] for k in DETERMINISTIC_FIELDS} for r in trainer.history]


# --8<-- [start:control]
def whole_and_resumed(
    rank: int, world_size: int, folder: str, fixed: bool
) -> dict[str, Any]:
    """At W ranks (L = W): one run straight through, one stopped at STOP,
    checkpointed, and resumed by freshly built objects (a new DDP, as a new
    process would have)."""
    world = World(rank, world_size)
    Path(folder).mkdir(parents=True, exist_ok=True)

    def build() -> Trainer:  # a ShardedTrainer on L = W logical shards
        return build_trainer(
            CONTROL,
            init_seed=CONTROL.seed,
            world=world,
            shards=world_size,
            fixed=fixed,
        )

    whole = build()
    whole.fit(CONTROL.steps)
    stopped = build()
    stopped.fit(STOP)
    # every rank writes its pieces; rank 0 commits; all get the directory
    checkpoint = save_training(stopped, folder, pointers=())
    resumed = build()
    resume(resumed, checkpoint)
    resumed.fit(CONTROL.steps)
    return {
        "whole": (weights(whole), history(whole)),
        "resumed": (weights(resumed), history(resumed)),
    }


# --8<-- [end:control]


def both_reductions(rank: int, world_size: int, folder: str) -> dict[str, Any]:
    """The control with DDP's own reduction, then with the lab's, in one
    start of the ranks."""
    return {
        name: whole_and_resumed(rank, world_size, f"{folder}/{name}", fixed)
        for name, fixed in (("ddp", False), ("lab", True))
    }
