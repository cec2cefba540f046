"""Learning-rate schedule: linear warmup over 10 % of the updates, then cosine
to zero."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch.optim.lr_scheduler import LambdaLR


# --8<-- [start:lr_lambda]
def make_lr_lambda(
    total_steps: int, warmup_frac: float
) -> Callable[[int], float]:
    """Multiplier of the base learning rate after `step` updates (LambdaLR's
    last_epoch)."""
    warmup = max(1, round(warmup_frac * total_steps))

    def lr_lambda(step: int) -> float:
        if step < warmup:
            # never 0: the first update already learns
            return (step + 1) / warmup
        progress = min(1.0, (step - warmup) / max(1, total_steps - warmup))
        return 0.5 * (1.0 + math.cos(math.pi * progress))

    return lr_lambda


def build_scheduler(
    optimizer: torch.optim.Optimizer, total_steps: int, warmup_frac: float
) -> LambdaLR:
    # Stepped once per update, not per micro-batch: per micro-batch, the cosine
    # would end `accum` times too early. A closure is not saved by
    # LambdaLR.state_dict() (only its position is), which is what we want: the
    # lambda is rebuilt from the config.
    return LambdaLR(optimizer, make_lr_lambda(total_steps, warmup_frac))


# --8<-- [end:lr_lambda]
