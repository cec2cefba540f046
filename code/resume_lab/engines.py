"""Data-parallel engines: DistributedDataParallel and FSDP2's fully_shard on
a CPU device mesh, each with the gradient sync switched off for accumulation
and its reduction replaced by the fixed-order one. One process needs no
engine: the same shards, the same fold, no wrapper."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import FSDPModule, fully_shard
from torch.nn.parallel import DistributedDataParallel

from resume_lab.reduction import (
    FixedOrderReduceScatter,
    ShardReduction,
    ddp_fixed_order_hook,
)

STRATEGIES = ("ddp", "fsdp")
# "engine": DDP's own bucketed average, the negative control of the
# Scaling out page; "fixed": shard order, bitwise at any world size
REDUCTIONS = ("fixed", "engine")


class Engine:
    """How the model is wrapped and how its gradients meet."""

    def __init__(self, model: nn.Module, reduction: ShardReduction) -> None:
        self.model = model
        self.reduction = reduction
        # the engine's hook or reduce-scatter does the fold; the local
        # engine calls it itself
        self.folds_in_hook = False

    def sync(self, enabled: bool) -> Any:
        """Inside, a backward pass does (True) or does not (False) reduce."""
        return nullcontext()

    def after_evaluation(self) -> None:
        """Called after each evaluation's forward-only pass."""

    def hand_over(self, parameters: list[nn.Parameter]) -> None:
        """After a shard's window: give its gradient to the reduction (the
        engines did so in their synced backward)."""
        if self.folds_in_hook:
            return
        pieces = {id(p): p.grad for p in parameters if p.grad is not None}
        totals = self.reduction.collect(pieces)
        if totals is not None:
            for p in parameters:
                p.grad = totals[id(p)]


class DDPEngine(Engine):
    def __init__(
        self, model: nn.Module, reduction: ShardReduction, *, fixed: bool
    ) -> None:
        wrapped = DistributedDataParallel(model)
        if fixed:
            wrapped.register_comm_hook(reduction, ddp_fixed_order_hook)
        super().__init__(wrapped, reduction)
        self.folds_in_hook = True

    def sync(self, enabled: bool) -> Any:
        assert isinstance(self.model, DistributedDataParallel)
        # no_sync covers the forward pass too: DDP decides there
        return nullcontext() if enabled else self.model.no_sync()


class FSDPEngine(Engine):
    def __init__(
        self, model: nn.Module, reduction: ShardReduction, world_size: int
    ) -> None:
        mesh = init_device_mesh("cpu", (world_size,))
        sharded = fully_shard(model, mesh=mesh)
        assert isinstance(sharded, FSDPModule)
        # public API, duck-typed interface (see FixedOrderReduceScatter)
        sharded.set_custom_reduce_scatter(FixedOrderReduceScatter(reduction))  # type: ignore[arg-type]
        super().__init__(model, reduction)
        self.folds_in_hook = True

    @contextmanager
    def _sync(self, enabled: bool) -> Iterator[None]:
        assert isinstance(self.model, FSDPModule)
        self.model.set_requires_gradient_sync(enabled)
        try:
            yield
        finally:
            self.model.set_requires_gradient_sync(True)

    def sync(self, enabled: bool) -> Any:
        return self._sync(enabled)

    def after_evaluation(self) -> None:
        # Measured on 2.13: after a forward pass with no backward (an
        # evaluation), the next backward left .grad unset; resharding the
        # parameters explicitly restores the normal cycle.
        assert isinstance(self.model, FSDPModule)
        self.model.reshard()


def build_engine(
    model: nn.Module,
    *,
    strategy: str,
    reduction: ShardReduction,
    world_size: int,
    fixed: bool = True,
) -> Engine:
    if world_size == 1:
        return Engine(model, reduction)  # nothing to sync or shard
    if strategy == "ddp":
        return DDPEngine(model, reduction, fixed=fixed)
    if not fixed:
        raise ValueError(
            "--reduction engine is the DDP negative control; "
            "use it with --strategy ddp"
        )
    return FSDPEngine(model, reduction, world_size)
