"""Evaluation that cannot change the training run it is part of."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

EVAL_BATCH = 200


# --8<-- [start:evaluate]
def evaluate(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor
) -> dict[str, float]:
    """Validation loss and accuracy from sums and counts, in a fixed order.

    Batches are slices of the tensors, not a DataLoader: creating a DataLoader
    iterator without its own generator draws from the global torch RNG even
    with shuffle=False, and that would change the next dropout mask of the
    training run.
    """
    was_training = model.training
    model.eval()  # dropout off
    loss_sum, correct, count = 0.0, 0, 0
    try:
        with torch.inference_mode():  # no graph; outputs feed metrics only
            for xb, yb in zip(
                x.split(EVAL_BATCH), y.split(EVAL_BATCH), strict=True
            ):
                logits = model(xb)
                loss_sum += F.cross_entropy(logits, yb, reduction="sum").item()
                correct += (logits.argmax(dim=-1) == yb).sum().item()
                # sums over counts: a short last batch is not overweighted
                count += yb.numel()
    finally:
        model.train(was_training)  # restore the mode we found, do not assume it
    return {"val_loss": loss_sum / count, "val_accuracy": correct / count}


# --8<-- [end:evaluate]
