"""Build every training object the way a fresh process does."""

from __future__ import annotations

import random
from collections.abc import Iterable

import numpy as np
import torch

from resume_lab.callbacks import EarlyStopping
from resume_lab.config import LabConfig
from resume_lab.data import Blobs, make_blobs
from resume_lab.events import Callback
from resume_lab.loop import Trainer
from resume_lab.model import build_model
from resume_lab.sampler import StepIndexedSampler
from resume_lab.schedule import build_scheduler


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
) -> Trainer:
    """Fresh model, optimizer, schedule and sampler.

    `init_seed` seeds the global RNGs first, so a resumed run may pass any
    value: resume() overwrites everything it influenced."""
    seed_everything(init_seed)
    data = data if data is not None else make_blobs(config.data_seed)
    # draws its initial weights from the torch RNG
    model = build_model(config.dropout)
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
    return Trainer(
        config,
        model,
        optimizer,
        scheduler,
        sampler,
        data,
        [*policy, *callbacks],
    )


# --8<-- [end:build_trainer]
