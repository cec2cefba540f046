"""A mean of batch means gives a short last batch the weight of a full one."""

import math

import torch
import torch.nn.functional as F

from resume_lab.data import make_blobs
from resume_lab.evaluate import EVAL_BATCH, evaluate
from resume_lab.model import build_model

torch.manual_seed(0)
# Untrained: the arithmetic, not the accuracy, is the point here.
model = build_model()
data = make_blobs(data_seed=0)
x, y = data.x_train[:410], data.y_train[:410]  # 410 = 200 + 200 + a tail of 10
sizes = [len(yb) for yb in y.split(EVAL_BATCH)]
assert sizes == [200, 200, 10]
full, tail = sizes[0], sizes[-1]  # examples in a full and in the last batch

# Right: sums over counts, as the lab's evaluate() does.
metrics = evaluate(model, x, y)
model.eval()
with torch.inference_mode():
    logits = model(x)  # every example at once: the definition of the mean
    per_example_loss = F.cross_entropy(logits, y, reduction="none")
    per_example_correct = (logits.argmax(dim=-1) == y).float()
assert abs(metrics["val_loss"] - per_example_loss.mean().item()) < 1e-6
assert metrics["val_accuracy"] == per_example_correct.sum().item() / len(y)


# Wrong: average each batch, then average the averages.
def mean_of_means(values: torch.Tensor) -> float:
    means = [chunk.mean().item() for chunk in values.split(EVAL_BATCH)]
    return sum(means) / len(means)


mean_of_loss_means = mean_of_means(per_example_loss)
mean_of_acc_means = mean_of_means(per_example_correct)
acc_means = [c.mean().item() for c in per_example_correct.split(EVAL_BATCH)]
# By chance, the untrained model gets all ten tail examples wrong, and the
# mean of batch means reports a lower accuracy than the split has.
assert acc_means[-1] == 0.0
assert mean_of_acc_means < metrics["val_accuracy"] - 0.05


# How much one example weighs: flip it from wrong to right, in the tail and
# then in the first full batch, and see how far each average moves.
def flipped(i: int) -> torch.Tensor:
    changed = per_example_correct.clone()
    changed[i] = 1 - changed[i]
    return changed


moves = {
    where: mean_of_means(flipped(i)) - mean_of_acc_means
    for where, i in (("tail", len(y) - 1), ("full", 0))
}
ratio = abs(moves["tail"] / moves["full"])
assert math.isclose(ratio, full / tail, rel_tol=1e-3) and full / tail == 20
overweight = round(ratio)
# Sums over counts: each of the 410 examples moves the accuracy by 1 / 410.
for i in range(len(y)):
    move = flipped(i).sum().item() / len(y) - metrics["val_accuracy"]
    assert abs(abs(move) - 1 / len(y)) < 1e-9

print(f"{len(y)} examples in batches of {', '.join(map(str, sizes))}")
print(
    f"sums / counts:       loss {metrics['val_loss']:.4f}, "
    f"accuracy {metrics['val_accuracy']:.4f}"
)
print(
    f"mean of batch means: loss {mean_of_loss_means:.4f}, "
    f"accuracy {mean_of_acc_means:.4f}"
)
print(f"accuracy per batch: {', '.join(f'{a:.3f}' for a in acc_means)}")
print(f"each tail example weighs {overweight}x an example of a full batch")
