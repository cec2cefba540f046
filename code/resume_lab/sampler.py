"""A sampler whose order is a pure function of (seed, epoch) and that can start
anywhere."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch


def epoch_seed(seed: int, epoch: int) -> int:
    """One 32-bit seed per (seed, epoch), well mixed.

    torch's CPU generator keeps only the low 32 bits of a seed (on 2.13, seeds
    5 << 32 and 6 << 32 give the same permutation), so packing the pair into
    one big integer would repeat orders. NumPy's SeedSequence hashes the pair
    and touches no global state.
    """
    return int(np.random.SeedSequence([seed, epoch]).generate_state(1)[0])


# --8<-- [start:sampler]
class StepIndexedSampler:
    """Shuffled micro-batches of example indices, addressable by
    (epoch, micro-batch index).

    Resuming at micro-batch k slices the epoch's permutation at k * micro_batch:
    nothing is replayed and no random number is drawn per skipped micro-batch
    (a fresh sampler draws the epoch's permutation once), so where to start is
    two integers, the epoch and k. The permutation comes from a local
    generator; the global RNG (dropout's) is never touched.
    """

    def __init__(self, num_examples: int, micro_batch: int, seed: int) -> None:
        self.num_examples = num_examples
        self.micro_batch = micro_batch
        self.seed = seed
        self._cached: tuple[int, torch.Tensor] | None = None

    @property
    def micro_batches_per_epoch(self) -> int:
        # the last one may be short
        return math.ceil(self.num_examples / self.micro_batch)

    def order(self, epoch: int) -> torch.Tensor:
        """The epoch's permutation; the same (seed, epoch) always gives the same
        order."""
        if self._cached is None or self._cached[0] != epoch:
            g = torch.Generator().manual_seed(epoch_seed(self.seed, epoch))
            self._cached = (
                epoch,
                torch.randperm(self.num_examples, generator=g),
            )
        return self._cached[1]

    def batches(
        self, epoch: int, start_micro: int = 0
    ) -> Iterator[torch.Tensor]:
        """Index tensors of the epoch's micro-batches, from `start_micro` to the
        epoch's end."""
        order = self.order(epoch)
        for i in range(start_micro, self.micro_batches_per_epoch):
            yield order[i * self.micro_batch : (i + 1) * self.micro_batch]

    def state_dict(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "num_examples": self.num_examples,
            "micro_batch": self.micro_batch,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if (state["num_examples"], state["micro_batch"]) != (
            self.num_examples,
            self.micro_batch,
        ):
            raise ValueError(
                f"sampler state is for another dataset or batch size: {state}"
            )
        # the data order comes from the checkpoint, never from an argument
        self.seed = state["seed"]
        self._cached = None


# --8<-- [end:sampler]
