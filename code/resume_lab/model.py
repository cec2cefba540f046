"""The model: an MLP 16 → 64 → 64 → 4 with dropout 0.1 (5,508
parameters)."""

from __future__ import annotations

from torch import nn

from resume_lab.data import NUM_CLASSES, NUM_FEATURES

HIDDEN = 64
NUM_PARAMETERS = (
    (NUM_FEATURES * HIDDEN + HIDDEN)
    + (HIDDEN * HIDDEN + HIDDEN)
    + (HIDDEN * NUM_CLASSES + NUM_CLASSES)
)


# --8<-- [start:build_model]
def build_model(dropout: float = 0.1) -> nn.Sequential:
    """Initialised from the global torch RNG, like any model built in a fresh
    process."""
    return nn.Sequential(
        nn.Linear(NUM_FEATURES, HIDDEN),
        nn.ReLU(),
        # draws from the global torch RNG: why RNG state is checkpointed
        nn.Dropout(dropout),
        nn.Linear(HIDDEN, HIDDEN),
        nn.ReLU(),
        nn.Dropout(dropout),
        nn.Linear(HIDDEN, NUM_CLASSES),
    )


# --8<-- [end:build_model]


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
