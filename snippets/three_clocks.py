"""Three clocks tick in one training loop: micro-batches, updates and examples
seen."""

import math
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

K = 4  # micro-batches accumulated into one update
MICRO_BATCH = 8
UPDATES = 12

torch.manual_seed(0)
model = nn.Linear(6, 3)
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)


def cosine(step: int, total: int = UPDATES) -> float:
    return 0.5 * (1 + math.cos(math.pi * min(step, total) / total))


# The schedule counts updates, so its horizon is UPDATES, whatever K is.
sched = torch.optim.lr_scheduler.LambdaLR(opt, cosine)

micro = updates = examples = 0
while updates < UPDATES:
    x, y = torch.randn(MICRO_BATCH, 6), torch.randint(0, 3, (MICRO_BATCH,))
    (F.cross_entropy(model(x), y) / K).backward()
    micro += 1  # clock 1: micro-batches
    examples += len(y)  # clock 3: data
    if micro % K:
        continue
    opt.step()
    sched.step()
    opt.zero_grad(set_to_none=True)
    updates += 1  # clock 2: updates, which the schedule follows

assert micro == K * updates and examples == MICRO_BATCH * micro
assert sched.last_epoch == UPDATES and sched.get_last_lr()[0] == 0.0

# The same schedule stepped once per micro-batch instead reaches zero K times
# too early.
sgd = torch.optim.SGD(model.parameters(), lr=1.0)
lost = torch.optim.lr_scheduler.LambdaLR(sgd, cosine)
weights = {k: t.clone() for k, t in model.state_dict().items()}
lr_after_micro = []
with warnings.catch_warnings():
    warnings.simplefilter("error")  # a warning would stop the loop
    for _ in range(K * UPDATES):
        # No gradient is set, so this moves nothing; without it, the
        # scheduler would warn that it steps before its optimizer.
        sgd.step()
        lost.step()
        lr_after_micro.append(lost.get_last_lr()[0])
assert all(torch.equal(t, weights[k]) for k, t in model.state_dict().items())
bare = torch.optim.SGD(model.parameters(), lr=1.0)  # never stepped
with warnings.catch_warnings(record=True) as warned:
    warnings.simplefilter("always")
    torch.optim.lr_scheduler.LambdaLR(bare, cosine).step()
assert any("before `optimizer.step()`" in str(w.message) for w in warned)
first_zero = lr_after_micro.index(0.0) + 1  # after this many micro-batches
assert first_zero == UPDATES  # the horizon, counted in micro-batches
ended_at_update = math.ceil(first_zero / K)  # the update that micro-batch is in
assert ended_at_update * K == UPDATES  # K times too early
print(
    f"{micro} micro-batches, {updates} updates, {examples} examples; "
    "stepped per micro-batch, "
    f"the cosine ends at update {ended_at_update} of {UPDATES}"
)
