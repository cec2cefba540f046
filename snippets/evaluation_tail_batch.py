"""A mean of batch means gives a short last batch the weight of a full one."""

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
loss_means = [
    chunk.mean().item() for chunk in per_example_loss.split(EVAL_BATCH)
]
acc_means = [
    chunk.mean().item() for chunk in per_example_correct.split(EVAL_BATCH)
]
mean_of_loss_means = sum(loss_means) / len(loss_means)
mean_of_acc_means = sum(acc_means) / len(acc_means)
# By chance, the untrained model gets all ten tail examples wrong.
assert acc_means[-1] == 0.0
assert abs(mean_of_acc_means - metrics["val_accuracy"]) > 0.05

# Why: in a mean of batch means each example weighs
# 1 / (number of batches * its batch size).
overweight = sizes[0] // sizes[-1]
assert overweight == 20

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
