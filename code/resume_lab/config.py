"""The lab's configuration: the settings that decide what is trained, and
nothing else."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


class ConfigError(ValueError):
    """A setting is out of range; the message names the setting and what it
    accepts."""


# --8<-- [start:config]
@dataclass(frozen=True)
class LabConfig:
    """Settings that decide the trajectory. A checkpoint stores them; a resume
    must match them.

    Run options (how often to save, how many files to keep, a time budget,
    the reduction on several processes) are not here, so changing them never
    blocks a resume.
    """

    seed: int = 0  # init, dropout and data order of a fresh run
    data_seed: int = 0  # the blobs themselves
    # updates (optimizer steps) to train for; the schedule spans them
    steps: int = 120
    accum: int = 2  # micro-batches per update
    micro_batch: int = 32
    lr: float = 3e-3
    weight_decay: float = 0.01
    warmup_frac: float = 0.1
    max_norm: float = 1.0
    dropout: float = 0.1
    eval_every: int = 20  # updates between evaluations; 0 never evaluates
    # evaluations without improvement before stopping; None: never stop
    patience: int | None = 5

    def __post_init__(self) -> None:
        for name in ("steps", "accum", "micro_batch"):
            if getattr(self, name) < 1:
                raise ConfigError(
                    f"{name} must be a positive whole number, "
                    f"got {getattr(self, name)}"
                )
        for name in ("seed", "data_seed"):
            if not 0 <= getattr(self, name) < 2**32:
                raise ConfigError(
                    f"{name} must be in 0..2**32-1, got {getattr(self, name)}"
                )
        if self.lr <= 0 or self.max_norm <= 0:
            raise ConfigError(
                "lr and max_norm must be positive, "
                f"got {self.lr} and {self.max_norm}"
            )
        if not 0.0 <= self.warmup_frac < 1.0:
            raise ConfigError(
                f"warmup_frac must be in [0, 1), got {self.warmup_frac}"
            )
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.eval_every < 0:
            raise ConfigError(
                "eval_every must be 0 (never) or positive, "
                f"got {self.eval_every}"
            )
        if self.patience is not None and self.patience < 1:
            raise ConfigError(
                f"patience must be positive or None, got {self.patience}"
            )

    def to_dict(self) -> dict[str, Any]:
        """A plain dict: JSON for the manifest, and loadable by
        torch.load(weights_only=True)."""
        return dataclasses.asdict(self)

    # --8<-- [end:config]

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> LabConfig:
        return cls(**values)

    def differences(self, other: dict[str, Any]) -> list[str]:
        """Human-readable 'name: theirs vs ours' lines for every setting that
        differs."""
        ours = self.to_dict()
        names = sorted(set(ours) | set(other))
        missing = "<unset>"
        return [
            f"{name}={other.get(name, missing)!r} in the file, "
            f"{ours.get(name, missing)!r} now"
            for name in names
            if ours.get(name, missing) != other.get(name, missing)
        ]
