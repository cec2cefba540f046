"""Logical shards: the unit that owns data and dropout randomness, so that
neither depends on how many processes run.

A micro-batch of the global order is cut into L shard slices; shard s's
slice and its dropout generator are a pure function of (seed, position, s).
A rank computes the shards it owns (a contiguous block of L / W); one process
can compute all L. The world size never enters the arithmetic.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import numpy as np
import torch

T = TypeVar("T")


class ShardError(ValueError):
    """L logical shards cannot be split over this many processes."""


def world_sizes_for(shards: int) -> list[int]:
    return [w for w in range(1, shards + 1) if shards % w == 0]


def check_divisible(shards: int, world_size: int) -> None:
    """L must be a multiple of W: every rank owns the same number of
    shards, so every rank makes the same collective calls."""
    if shards < 1:
        raise ShardError(f"--shards must be positive, got {shards}")
    if shards % world_size:
        works = ", ".join(str(w) for w in world_sizes_for(shards))
        raise ShardError(
            f"{shards} logical shards cannot be split over {world_size} "
            f"processes; this run works at world sizes {works}"
        )


def owned(shards: int, world_size: int, rank: int) -> range:
    """The contiguous block of shards that `rank` computes."""
    per_rank = shards // world_size
    return range(rank * per_rank, (rank + 1) * per_rank)


def shard_slice(indices: torch.Tensor, shards: int, shard: int) -> torch.Tensor:
    """Shard `shard`'s part of one micro-batch: the same examples whoever
    computes it. A short last micro-batch leaves late shards fewer (or no)
    examples; the loss is normalised by the window's total, so that is
    exact."""
    return torch.tensor_split(indices, shards)[shard]


def shard_seed(seed: int, shard: int) -> int:
    """One 32-bit seed per (run seed, shard), hashed like the sampler's."""
    return int(
        np.random.SeedSequence([seed, 0x5A4D, shard]).generate_state(1)[0]
    )


# --8<-- [start:shard_rng]
class ShardGenerators:
    """One dropout generator state per logical shard (per-shard keys in the
    checkpoint). nn.Dropout draws from the process's global generator, so a
    shard's state is swapped in for its forward pass and read back after;
    the process's own state is put back untouched."""

    def __init__(self, seed: int, shards: range) -> None:
        self.states: dict[int, torch.Tensor] = {}
        for shard in shards:
            generator = torch.Generator().manual_seed(shard_seed(seed, shard))
            self.states[shard] = generator.get_state()

    @contextmanager
    def drawing(self, shard: int) -> Iterator[None]:
        outer = torch.get_rng_state()
        torch.set_rng_state(self.states[shard])
        try:
            yield
        finally:
            self.states[shard] = torch.get_rng_state()
            torch.set_rng_state(outer)

    def run(self, shard: int, fn: Callable[[], T]) -> T:
        with self.drawing(shard):
            return fn()

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {shard_key(s): state for s, state in self.states.items()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        for shard in self.states:
            self.states[shard] = state[shard_key(shard)]


# --8<-- [end:shard_rng]


def shard_key(shard: int) -> str:
    """The checkpoint key of one shard's state. Never one key for all
    ranks: DCP keeps a single copy of an item that several ranks save under
    the same key."""
    return f"shard-{shard:04d}"
