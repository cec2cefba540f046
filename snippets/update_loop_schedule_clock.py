"""The same warmup + cosine LambdaLR, stepped per update (right) and per
micro-batch (wrong)."""

import math
import warnings

import torch

K = 4
UPDATES = 12  # the horizon, in updates
WARMUP = 2


def warmup_cosine(t: int) -> float:
    if t < WARMUP:
        return (t + 1) / (WARMUP + 1)
    return 0.5 * (
        1 + math.cos(math.pi * min((t - WARMUP) / (UPDATES - WARMUP), 1.0))
    )


def lr_used_by_each_update(
    step_per_micro_batch: bool,
) -> tuple[list[float], list[str], int]:
    """The learning rate each of the UPDATES updates runs with, every warning
    raised, and the scheduler's counter at the end."""
    w = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([w], lr=1.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, warmup_cosine)
    used = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _update in range(UPDATES):
            for micro in range(1, K + 1):
                w.grad = torch.zeros(1)  # stands in for backward()
                if step_per_micro_batch:
                    sched.step()  # the bug: a schedule on the micro-batch clock
                if micro == K:
                    used.append(opt.param_groups[0]["lr"])
                    opt.step()
                    opt.zero_grad()
            if not step_per_micro_batch:
                sched.step()
    warned = [f"{c.category.__name__}: {c.message}" for c in caught]
    return used, warned, sched.last_epoch


# Each run goes to its end: nothing raises.
right, right_warnings, right_count = lr_used_by_each_update(False)
wrong, wrong_warnings, wrong_count = lr_used_by_each_update(True)
# The counter counts sched.step() calls: UPDATES of them, or K x UPDATES.
assert right_count == UPDATES and wrong_count == K * UPDATES

# Per update: the schedule as written, ending at the last update.
assert (
    right == [warmup_cosine(u) for u in range(UPDATES)] and not right_warnings
)
# Per micro-batch: update u runs with the rate meant for update K(u + 1). Warmup
# and cosine both run K times too fast, and the rate sits at zero for the rest
# of the run.
assert wrong == [warmup_cosine(K * (u + 1)) for u in range(UPDATES)]
# With K > WARMUP (here 4 > 2) the first update already runs past warmup: no
# warmup, and never the peak.
assert (
    K > WARMUP
    and wrong[0] == warmup_cosine(K)
    and max(wrong) < 1.0 == max(right)
)
first_zero = wrong.index(0.0)
assert first_zero == UPDATES // K - 1 and set(wrong[first_zero:]) == {0.0}
zero_from = first_zero + 1  # numbering the updates from 1, as the table does
# The only hint: sched.step() ran before the first opt.step(), and PyTorch
# warns about the order, once.
order = "UserWarning: Detected call of `lr_scheduler.step()` before"
assert len(wrong_warnings) == 1 and wrong_warnings[0].startswith(order)

print(f"K = {K}; warmup {WARMUP} and cosine to zero over {UPDATES} updates")
print(
    f"{'update':>6} {'stepped per update':>19} {'stepped per micro-batch':>24}"
)
for u, (good, bad) in enumerate(zip(right, wrong, strict=True), start=1):
    print(f"{u:>6} {good:>19.4f} {bad:>24.4f}")
