"""The processes of one run: who am I, how many are we, and the few
collectives the loop needs. One process is a world of size 1 with no
process group: the same code path, with every collective a no-op."""

from __future__ import annotations

import gc
import os
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from resume_lab.events import StopReason

# collectives time out instead of hanging forever when a rank died
TIMEOUT = timedelta(seconds=120)


@dataclass(frozen=True)
class World:
    rank: int = 0
    size: int = 1

    @property
    def is_writer(self) -> bool:
        """Rank 0 writes the run folder's shared files."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return dist.is_available() and dist.is_initialized()

    def barrier(self) -> None:
        if self.distributed:
            dist.barrier()

    def broadcast(self, value: Any) -> Any:
        """Rank 0's `value` on every rank."""
        if not self.distributed:
            return value
        box = [value]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def any(self, flag: bool) -> bool:
        """True on every rank if it is True on any."""
        if not self.distributed:
            return flag
        tensor = torch.tensor([int(flag)])
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
        return bool(tensor.item())

    # --8<-- [start:agree]
    def agree(self, reason: StopReason | None) -> StopReason | None:
        """Every rank stops at the same boundary, for one reason: a signal
        or a time budget seen by one rank stops them all; the lowest rank
        that wants to stop names the reason. One small all-gather."""
        if not self.distributed:
            return reason
        reasons = list(StopReason)
        mine = torch.tensor(
            [0 if reason is None else reasons.index(reason) + 1]
        )
        codes = [torch.zeros_like(mine) for _ in range(self.size)]
        dist.all_gather(codes, mine)
        wanted = [int(code.item()) for code in codes if code.item()]
        return reasons[wanted[0] - 1] if wanted else None

    # --8<-- [end:agree]


def started_by_torchrun() -> bool:
    return "WORLD_SIZE" in os.environ and "RANK" in os.environ


def join() -> World:
    """Join the torchrun group (gloo, CPU), or be a world of one."""
    if not started_by_torchrun():
        return World()
    if not dist.is_initialized():
        dist.init_process_group("gloo", timeout=TIMEOUT)
    return World(dist.get_rank(), dist.get_world_size())


def leave() -> None:
    """Leave without the exit hang a gloo process can show: every rank
    reaches the barrier, and the engine's objects (which the caller has
    dropped) are collected before the group is destroyed."""
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        gc.collect()
        dist.destroy_process_group()
