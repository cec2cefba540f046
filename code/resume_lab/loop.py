"""The Trainer: one readable loop that owns the order of operations; callbacks
own policy."""

from __future__ import annotations

import time
from collections.abc import Iterable
from itertools import islice
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils import clip_grad_norm_

from resume_lab.clocks import Clocks
from resume_lab.config import LabConfig
from resume_lab.data import Blobs
from resume_lab.evaluate import evaluate
from resume_lab.events import COMPLETED, Callback, Event, StopReason
from resume_lab.rng import ProcessRNG
from resume_lab.sampler import StepIndexedSampler
from resume_lab.shards import ShardGenerators
from resume_lab.world import World

# The per-update fields that are a pure function of the configuration.
# step_time is wall clock.
DETERMINISTIC_FIELDS = (
    "step",
    "loss",
    "grad_norm",
    "lr",
    "examples_seen",
    "val_loss",
    "val_accuracy",
)


# --8<-- [start:trainer_class]
class Trainer:
    """Training state plus the loop.

    Everything a checkpoint needs is an attribute here."""

    # --8<-- [end:trainer_class]

    def __init__(
        self,
        config: LabConfig,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        scheduler: torch.optim.lr_scheduler.LRScheduler,
        sampler: StepIndexedSampler,
        data: Blobs,
        callbacks: Iterable[Callback] = (),
    ) -> None:
        self.config = config
        self.model = model
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.sampler = sampler
        self.data = data
        self.callbacks = list(callbacks)
        # updates, data position (epoch, next micro-batch), examples seen
        self.clocks = Clocks()
        # where dropout draws from: the process's generators here; one per
        # logical shard on a ShardedTrainer
        self.rng: ProcessRNG | ShardGenerators = ProcessRNG()
        self.shards: int | None = None  # no logical shards: the course path
        self.world = World()  # a world of one: every collective a no-op
        self.history: list[dict[str, Any]] = []
        self.stop_reason: StopReason | None = None

    # The clocks, as trainer.step and so on (one object holds them all, so
    # a checkpoint saves and restores them as one).
    @property
    def step(self) -> int:
        return self.clocks.step

    @step.setter
    def step(self, value: int) -> None:
        self.clocks.step = value

    @property
    def epoch(self) -> int:
        return self.clocks.epoch

    @epoch.setter
    def epoch(self, value: int) -> None:
        self.clocks.epoch = value

    @property
    def micro(self) -> int:
        return self.clocks.micro

    @micro.setter
    def micro(self, value: int) -> None:
        self.clocks.micro = value

    @property
    def examples_seen(self) -> int:
        return self.clocks.examples_seen

    @examples_seen.setter
    def examples_seen(self, value: int) -> None:
        self.clocks.examples_seen = value

    def emit(self, event: Event, *args: Any) -> None:
        for callback in self.callbacks:
            getattr(callback, event.value)(self, *args)

    def request_stop(self, reason: StopReason) -> None:
        """Ask the loop to stop at the end of this update; the first reason
        given wins."""
        if self.stop_reason is None:
            self.stop_reason = reason

    # --8<-- [start:trainer_fit]
    def fit(self, max_steps: int) -> StopReason:
        """Train until `max_steps` updates are done or a callback stops the run;
        return why."""
        self.model.train()
        self.stop_reason = None
        self.emit(Event.FIT_START)
        while self.step < max_steps and self.stop_reason is None:
            started = time.perf_counter()
            # One update: `accum` micro-batches, fewer at the end of an epoch
            # (a short window).
            batches = self.sampler.batches(self.epoch, self.micro)
            window = list(islice(batches, self.config.accum))
            window_examples = sum(len(indices) for indices in window)
            loss_sum, grad_norm = self.accumulate(window, window_examples)
            # the rate this update uses
            lr = self.optimizer.param_groups[0]["lr"]
            self.optimizer.step()
            self.scheduler.step()  # once per update, never per micro-batch
            self.optimizer.zero_grad(set_to_none=True)
            self._advance(micro_batches=len(window), examples=window_examples)
            self._log(
                loss_sum, grad_norm, lr, step_time=time.perf_counter() - started
            )
            self.emit(Event.STEP_END)
            if (
                self.config.eval_every
                and self.step % self.config.eval_every == 0
            ):
                metrics = evaluate(self.model, self.data.x_val, self.data.y_val)
                self.history[-1].update(metrics)
                self.emit(Event.EVAL_END, metrics)
            # An update boundary: gradients are None and the window is complete.
            # Where the lab's Checkpoint callback saves (its save when fit
            # returns holds this same state), so a resume never starts
            # mid-accumulation.
            self.emit(Event.BOUNDARY)
            self.stop_reason = self.agree(self.stop_reason)
        reason = self.stop_reason or COMPLETED
        self.emit(Event.FIT_END, reason)
        return reason

    # --8<-- [end:trainer_fit]

    # --8<-- [start:accumulate]
    def accumulate(
        self, window: list[torch.Tensor], window_examples: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Forward and backward over the update's micro-batches, then clip;
        returns (loss, pre-clip gradient norm). The gradient is in .grad."""
        loss_sum = torch.zeros(())
        for indices in window:
            logits = self.model(self.data.x_train[indices])
            # Summed loss over the window's example count: the window's mean
            # loss (to round-off), even for a short window.
            loss = F.cross_entropy(
                logits, self.data.y_train[indices], reduction="sum"
            )
            loss = loss / window_examples
            loss.backward()  # gradients add up in .grad across the window
            loss_sum += loss.detach()  # stays a tensor: no .item() until _log
        # Pre-clip total norm; a NaN or inf gradient raises here instead of
        # becoming zeros and NaN that the step would carry into the weights.
        grad_norm = clip_grad_norm_(
            self.model.parameters(),
            self.config.max_norm,
            error_if_nonfinite=True,
        )
        return loss_sum, grad_norm

    # --8<-- [end:accumulate]

    def agree(self, reason: StopReason | None) -> StopReason | None:
        """One process decides alone; a distributed Trainer makes every rank
        stop at the same boundary."""
        return reason

    def _advance(self, micro_batches: int, examples: int) -> None:
        per_epoch = self.sampler.micro_batches_per_epoch
        self.clocks.advance(micro_batches, examples, per_epoch)

    def _log(
        self,
        loss: torch.Tensor,
        grad_norm: torch.Tensor,
        lr: float,
        step_time: float,
    ) -> None:
        # The one sync point of an update: .item() here, where the numbers
        # are recorded.
        self.history.append(
            {
                "step": self.step,
                "loss": loss.item(),
                "grad_norm": grad_norm.item(),
                "lr": lr,
                "examples_seen": self.examples_seen,
                "val_loss": None,
                "val_accuracy": None,
                "step_time": step_time,
            }
        )
