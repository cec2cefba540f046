import torch
import torch.nn.functional as F


def evaluate(model, x, y, batch=200):
    """Mean loss and accuracy over every example of (x, y)."""
    was_training = model.training
    model.eval()  # modules: dropout off, BatchNorm's running statistics
    loss_sum, correct = 0.0, 0
    try:
        with torch.inference_mode():  # autograd: no graph, nothing kept
            for xb, yb in zip(x.split(batch), y.split(batch), strict=True):
                logits = model(xb)
                loss_sum += F.cross_entropy(logits, yb, reduction="sum").item()
                correct += (logits.argmax(dim=-1) == yb).sum().item()
    finally:
        model.train(was_training)  # put back the mode it came in
    return loss_sum / len(y), correct / len(y)
