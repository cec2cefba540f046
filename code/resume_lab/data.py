"""Four overlapping Gaussian blobs in 16-D: 1,600 training and 400 validation
points."""

from __future__ import annotations

from dataclasses import dataclass

import torch

NUM_FEATURES = 16
NUM_CLASSES = 4
NUM_TRAIN = 1_600
NUM_VAL = 400
# Distance of the blob centres from the origin, in units of the blobs' standard
# deviation: small enough that the blobs overlap (no model reaches 100 %), large
# enough to learn.
CENTER_SCALE = 0.7


@dataclass(frozen=True)
class Blobs:
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_val: torch.Tensor
    y_val: torch.Tensor


# --8<-- [start:make_blobs]
def make_blobs(data_seed: int) -> Blobs:
    """The dataset as a pure function of `data_seed`.

    A local generator keeps the global torch RNG untouched: building the data
    must not shift the stream that model init and dropout draw from.
    """
    g = torch.Generator().manual_seed(data_seed)
    centers = torch.randn(NUM_CLASSES, NUM_FEATURES, generator=g) * CENTER_SCALE
    n = NUM_TRAIN + NUM_VAL
    # balanced classes
    labels = (torch.arange(n) % NUM_CLASSES)[torch.randperm(n, generator=g)]
    points = centers[labels] + torch.randn(n, NUM_FEATURES, generator=g)
    return Blobs(
        points[:NUM_TRAIN],
        labels[:NUM_TRAIN],
        points[NUM_TRAIN:],
        labels[NUM_TRAIN:],
    )


# --8<-- [end:make_blobs]
