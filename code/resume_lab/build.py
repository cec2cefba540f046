"""Build every training object the way a fresh process does."""

from __future__ import annotations

import random
from collections.abc import Iterable

import numpy as np
import torch
from torch import nn

from resume_lab.callbacks import EarlyStopping
from resume_lab.config import LabConfig
from resume_lab.data import Blobs, make_blobs
from resume_lab.engines import build_engine
from resume_lab.events import Callback
from resume_lab.loop import Trainer
from resume_lab.model import build_model
from resume_lab.reduction import ShardReduction
from resume_lab.sampler import StepIndexedSampler
from resume_lab.schedule import build_scheduler
from resume_lab.sharded import ShardedTrainer
from resume_lab.shards import check_divisible
from resume_lab.world import World


def seed_everything(seed: int) -> None:
    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed)


# --8<-- [start:build_trainer]
def build_trainer(
    config: LabConfig,
    *,
    init_seed: int,
    data: Blobs | None = None,
    callbacks: Iterable[Callback] = (),
    shards: int | None = None,
    world: World | None = None,
    strategy: str = "ddp",
    fixed: bool = True,
) -> Trainer:
    """Fresh model, optimizer, schedule and sampler.

    `init_seed` seeds the global RNGs first, so a resumed run may pass another
    value (the demo passes seed + 1): a resume that restores the RNG overwrites
    everything it influenced. With `shards`, a
    ShardedTrainer on L logical shards over `world`'s ranks: the model is
    wrapped by its engine (DDP, FSDP2, none for one process) and the
    optimizer built on the engine's parameters."""
    world = world or World()
    if shards is not None:
        check_divisible(shards, world.size)
    seed_everything(init_seed)
    data = data if data is not None else make_blobs(config.data_seed)
    # draws its initial weights from the torch RNG
    model: nn.Module = build_model(config.dropout)
    engine = None
    if shards is not None:
        reduction = ShardReduction(shards)
        engine = build_engine(
            model,
            strategy=strategy,
            reduction=reduction,
            world_size=world.size,
            fixed=fixed,
        )
        model = engine.model  # FSDP2 replaces the parameters
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=config.lr, weight_decay=config.weight_decay
    )
    scheduler = build_scheduler(optimizer, config.steps, config.warmup_frac)
    sampler = StepIndexedSampler(
        len(data.y_train), config.micro_batch, seed=config.seed
    )
    policy: list[Callback] = (
        [EarlyStopping(config.patience)] if config.patience else []
    )
    parts = (config, model, optimizer, scheduler, sampler, data)
    if shards is None or engine is None:
        return Trainer(*parts, [*policy, *callbacks])
    return ShardedTrainer(
        *parts,
        [*policy, *callbacks],
        world=world,
        shards=shards,
        engine=engine,
        strategy=strategy,
        fixed=fixed,
    )


# --8<-- [end:build_trainer]
