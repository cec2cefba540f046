"""The training clocks, as one stateful object: updates done, where the data
stands (epoch and next micro-batch), and examples seen.

A checkpoint holds them under the keys STEP and DATA_POSITION; a clock
added here is saved and restored everywhere without another edit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from resume_lab import state_keys as keys


# --8<-- [start:clocks]
@dataclass
class Clocks:
    step: int = 0  # updates done (optimizer.step() calls)
    epoch: int = 0  # the epoch the next micro-batch comes from
    micro: int = 0  # the next micro-batch's index in it
    examples_seen: int = 0

    def advance(
        self, micro_batches: int, examples: int, per_epoch: int
    ) -> None:
        """One update of `micro_batches` micro-batches done."""
        self.step += 1
        self.examples_seen += examples
        self.micro += micro_batches
        if self.micro == per_epoch:
            # the next update draws a new permutation
            self.epoch, self.micro = self.epoch + 1, 0

    def state_dict(self) -> dict[str, Any]:
        return {
            keys.STEP: self.step,
            keys.DATA_POSITION: {
                "epoch": self.epoch,
                "micro": self.micro,
                "examples_seen": self.examples_seen,
            },
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        position = state[keys.DATA_POSITION]
        self.step = state[keys.STEP]
        self.epoch, self.micro = position["epoch"], position["micro"]
        self.examples_seen = position["examples_seen"]


# --8<-- [end:clocks]
