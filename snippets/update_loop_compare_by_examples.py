"""Two runs with different batch sizes: compare them by examples seen, not by
steps."""

import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
centres = torch.randn(4, 16) * 0.4
labels = torch.randint(0, 4, (1024 + 512,))
inputs = centres[labels] + torch.randn(len(labels), 16)
train_x, train_y = inputs[:1024], labels[:1024]
val_x, val_y = inputs[1024:], labels[1024:]
start = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
REPORT_EVERY = 256  # examples


def run(batch_size: int) -> dict[int, tuple[int, float]]:
    """One epoch with AdamW; at every REPORT_EVERY examples: (updates so far,
    validation loss)."""
    model = copy.deepcopy(start)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    examples = 0
    report = {}
    batches = zip(
        train_x.split(batch_size), train_y.split(batch_size), strict=True
    )
    for step, (xb, yb) in enumerate(batches, start=1):
        F.cross_entropy(model(xb), yb).backward()
        opt.step()
        opt.zero_grad()
        examples += len(yb)
        if examples % REPORT_EVERY == 0:
            with torch.no_grad():
                report[examples] = (
                    step,
                    F.cross_entropy(model(val_x), val_y).item(),
                )
    return report


small, large = run(batch_size=16), run(batch_size=64)

# Same data, same number of examples: step counts disagree by the batch-size
# ratio.
assert small.keys() == large.keys() == {256, 512, 768, 1024}
for seen in small:
    assert small[seen][0] == 4 * large[seen][0]
# "Step 16" names two different amounts of training: 256 examples in one run,
# 1,024 in the other.
same_step = large[1024][0]
assert small[256][0] == same_step == 16
# Compared at step 16, the large batch looks better; it has simply seen 4 x the
# data.
assert large[1024][1] < small[256][1]
# Compared at equal examples, this small-batch run is ahead at every point.
assert all(small[seen][1] < large[seen][1] for seen in small)

print(
    f"{'examples':>8} | {'batch 16: step':>14} {'loss':>6} | "
    f"{'batch 64: step':>14} {'loss':>6}"
)
for seen in sorted(small):
    (s_step, s_loss), (l_step, l_loss) = small[seen], large[seen]
    print(
        f"{seen:>8} | {s_step:>14} {s_loss:>6.3f} | {l_step:>14} {l_loss:>6.3f}"
    )
