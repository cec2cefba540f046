"""The Trainer on L logical shards, run by W processes (W divides L).

Only `accumulate` (how an update's gradient is made) and `agree` (how the
ranks stop together) differ from the one-process Trainer: the loop, the
callbacks, the schedule and the evaluation are the same code.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from resume_lab.engines import Engine
from resume_lab.events import Callback, StopReason
from resume_lab.loop import Trainer
from resume_lab.reduction import clip_in_fixed_order
from resume_lab.shards import (
    ShardGenerators,
    owned,
    shard_slice,
)
from resume_lab.world import World


class AfterEvaluation(Callback):
    """Lets the engine tidy up after an evaluation (FSDP2 reshards)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def on_eval_end(self, trainer: Any, metrics: dict[str, float]) -> None:
        self.engine.after_evaluation()


class ShardedTrainer(Trainer):
    rng: ShardGenerators
    shards: int

    def __init__(
        self,
        *args: Any,
        world: World,
        shards: int,
        engine: Engine,
        strategy: str,
        fixed: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.world = world
        self.shards = shards
        self.strategy = strategy
        self.engine = engine
        self.fixed = fixed
        self.owned = owned(shards, world.size, world.rank)
        # one dropout generator per owned shard, saved under per-shard keys
        self.rng = ShardGenerators(self.config.seed, self.owned)
        self.callbacks.insert(0, AfterEvaluation(engine))

    def shard_loss(
        self, shard: int, indices: torch.Tensor, window_examples: int
    ) -> torch.Tensor:
        part = shard_slice(indices, self.shards, shard)
        with self.rng.drawing(shard):  # dropout: this shard's masks
            logits = self.model(self.data.x_train[part])
        loss = F.cross_entropy(logits, self.data.y_train[part], reduction="sum")
        return loss / window_examples

    # --8<-- [start:sharded_accumulate]
    def accumulate(
        self, window: list[torch.Tensor], window_examples: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Each owned shard's window in turn: no gradient sync until its last
        micro-batch, whose synced backward hands the shard's gradient to the
        fixed-order reduction; after the last shard, .grad holds the sum."""
        parameters = list(self.model.parameters())
        losses = []
        for slot, shard in enumerate(self.owned):
            self.engine.reduction.slot = slot
            loss_sum = torch.zeros(())
            for k, indices in enumerate(window):
                last = k == len(window) - 1
                with self.engine.sync(last and self.syncs_shard(slot)):
                    loss = self.shard_loss(shard, indices, window_examples)
                    (loss * self.loss_scale).backward()
                loss_sum += loss.detach()
            losses.append(loss_sum)
            if self.fixed:
                self.engine.hand_over(parameters)
                if slot < len(self.owned) - 1:
                    for p in parameters:  # handed over: not part of .grad
                        p.grad = None
        loss = self.engine.reduction.fold_losses(torch.stack(losses))
        return loss, clip_in_fixed_order(parameters, self.config.max_norm)

    # --8<-- [end:sharded_accumulate]

    def syncs_shard(self, slot: int) -> bool:
        # the control (DDP's own reduction) syncs once, after every shard
        return self.fixed or slot == len(self.owned) - 1

    @property
    def loss_scale(self) -> float:
        # DDP's own reduction averages over ranks; the lab's adds. Scaling
        # by W (a power of two here) is exact.
        return 1.0 if self.fixed else float(self.world.size)

    def agree(self, reason: StopReason | None) -> StopReason | None:
        return self.world.agree(reason)
