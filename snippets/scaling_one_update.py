"""The first update of the lab on L = 4 logical shards, on one rank of W
(or in one process): the gradient it leaves, the clipped norm, and what the
fixed-order reduction gathered for it."""

from itertools import islice
from typing import Any

import torch

from resume_lab.build import build_trainer
from resume_lab.config import LabConfig
from resume_lab.reduction import full_gradients
from resume_lab.world import World

SHARDS = 4
CONFIG = LabConfig(steps=4, accum=2, eval_every=0, patience=None)


def one_update(rank: int, world_size: int, strategy: str) -> dict[str, Any]:
    trainer = build_trainer(
        CONFIG,
        init_seed=CONFIG.seed,
        world=World(rank, world_size),
        shards=SHARDS,
        strategy=strategy,
    )
    reduction = trainer.engine.reduction  # type: ignore[attr-defined]
    gathered: list[int] = []  # how many numbers each gather left here
    gather = reduction.gather

    def counted(local: torch.Tensor) -> list[torch.Tensor]:
        rows = gather(local)
        gathered.append(sum(row.numel() for row in rows))
        return rows

    reduction.gather = counted
    window = list(islice(trainer.sampler.batches(0, 0), CONFIG.accum))
    examples = sum(len(indices) for indices in window)
    loss, norm = trainer.accumulate(window, examples)
    parameters = list(trainer.model.parameters())
    return {
        "grads": [g.clone() for g in full_gradients(parameters)],
        "norm": norm,
        "loss": loss,
        "gathered": gathered,
    }
