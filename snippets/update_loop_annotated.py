"""One update = a window of up to K micro-batches; log once per update, and
call .item() only there."""

import itertools
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import clip_grad_norm_

K = 4  # micro-batches per update
MICRO = 8  # examples per micro-batch
EPOCHS = 2
MAX_NORM = 1.0

torch.manual_seed(0)
# 11 micro-batches: windows of 4, 4, 3
X, Y = torch.randn(88, 6), torch.randint(0, 3, (88,))
model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
opt = torch.optim.AdamW(model.parameters(), lr=3e-2)

micro_per_epoch = math.ceil(len(X) / MICRO)
updates_per_epoch = math.ceil(micro_per_epoch / K)
TOTAL = EPOCHS * updates_per_epoch  # the schedule's horizon, counted in updates
WARMUP = 1


def warmup_cosine(update: int) -> float:
    if update < WARMUP:
        return (update + 1) / (WARMUP + 1)
    progress = (update - WARMUP) / (TOTAL - WARMUP)
    return 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))


sched = torch.optim.lr_scheduler.LambdaLR(opt, warmup_cosine)


def windows(epoch: int):
    """This epoch's micro-batches (index tensors), grouped K at a time; the last
    may be short."""
    order = torch.randperm(
        len(X), generator=torch.Generator().manual_seed(epoch)
    )
    micro_batches = list(order.split(MICRO))
    for first in range(0, len(micro_batches), K):
        yield micro_batches[first : first + K]


step = micro = examples = 0  # the three clocks
log = []
model.train()
started = last_log = time.perf_counter()  # step time: log point to log point
for epoch in range(EPOCHS):
    for window in windows(epoch):
        # The divisor: known before the first backward.
        n = sum(len(idx) for idx in window)
        loss_sum = torch.zeros(())  # a tensor to the log point: no .item()
        for idx in window:
            loss = F.cross_entropy(model(X[idx]), Y[idx], reduction="sum") / n
            loss.backward()  # adds into .grad
            loss_sum += loss.detach()  # detach: keep the number, not the graph
            micro += 1  # clock 1: micro-batches
        # The PRE-clip norm.
        grad_norm = clip_grad_norm_(model.parameters(), MAX_NORM)
        lr = sched.get_last_lr()[0]  # the rate this update is about to use
        opt.step()
        sched.step()  # the schedule follows updates, never micro-batches
        opt.zero_grad(set_to_none=True)
        step += 1  # clock 2: updates (schedule, evaluation, checkpoints)
        examples += n  # clock 3: data
        # The log point: the only .item() calls written in this loop.
        loss_value, norm_value = loss_sum.item(), grad_norm.item()
        now = time.perf_counter()  # after the syncs: the update's work is done
        log.append(
            {
                "step": step,
                "examples": examples,
                "micro": micro,
                "loss": loss_value,
                "grad_norm": norm_value,
                "lr": lr,
                "step_time": now - last_log,
            }
        )
        last_log = now

# The clocks: a short window makes examples a poor proxy for
# K x MICRO x updates. One log line per update.
assert step == len(log) == TOTAL == 6
assert micro == EPOCHS * micro_per_epoch == 22
assert examples == EPOCHS * len(X) == 176
# Each window as (micro-batches, examples): two full ones, then a short one.
shapes = [
    (len(w), sum(len(idx) for idx in w))
    for epoch in range(EPOCHS)
    for w in windows(epoch)
]
assert shapes == [(K, K * MICRO), (K, K * MICRO), (3, 24)] * EPOCHS
(full_micro, full), (short_micro, short) = shapes[0], shapes[-1]


def weights(size: int, share) -> torch.Tensor:
    """Each example's weight in a window of `size` examples whose micro-batch
    losses are `share(losses)`: the gradient of the window's loss with
    respect to each example's loss."""
    per_example = torch.ones(size, requires_grad=True)
    sum(share(chunk) for chunk in per_example.split(MICRO)).backward()
    return per_example.grad


def mean_over_k(chunk):
    return chunk.mean() / K


# The short window: means over K weigh each example 1/32, sums over n 1/24.
assert torch.equal(weights(short, mean_over_k), torch.full((short,), 1 / full))
by_n = weights(short, lambda chunk: chunk.sum() / short)
assert torch.equal(by_n, torch.full((short,), 1 / short))
# A full window: sums over n = 32 and means over K weigh every example alike.
assert torch.equal(
    weights(full, lambda chunk: chunk.sum() / full), weights(full, mean_over_k)
)
micro_steps, sizes = zip(*shapes, strict=True)
assert [r["micro"] for r in log] == list(itertools.accumulate(micro_steps))
assert [r["examples"] for r in log] == list(itertools.accumulate(sizes))
# The logged rate is the one each update used: warmup, then cosine; the
# schedule ends at TOTAL, after an update that still had a rate above zero.
assert [r["lr"] for r in log] == [3e-2 * warmup_cosine(u) for u in range(TOTAL)]
assert sched.last_epoch == TOTAL and sched.get_last_lr()[0] == 0.0
assert log[-1]["lr"] > 0
# Step times run from log point to log point, so they add up to the whole
# run: fetching each window is inside them too.
total_time = sum(r["step_time"] for r in log)
assert math.isclose(total_time, last_log - started, rel_tol=0, abs_tol=1e-9)

if __name__ == "__main__":  # run as a script: print the log
    print(
        f"{'step':>4} {'micro':>5} {'examples':>8} "
        f"{'loss':>7} {'grad norm':>9} {'lr':>9}"
    )
    for r in log:
        print(
            f"{r['step']:>4} {r['micro']:>5} {r['examples']:>8} "
            f"{r['loss']:>7.4f} {r['grad_norm']:>9.4f} {r['lr']:>9.2e}"
        )
