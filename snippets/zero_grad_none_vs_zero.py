"""A gradient of None and a gradient of zeros are different inputs to an
optimizer step."""

import math

import torch


def one_step(optimizer: str, grad: str, warm: bool) -> tuple[float, dict, bool]:
    """A scalar weight of 1.0; optionally one real step (gradient 1.0) first;
    then one step whose gradient is `grad`: "none" (.grad is None) or "zero"
    (.grad is a zero tensor). Returns the weight, the state, and whether
    that last step moved the weight at all."""
    w = torch.nn.Parameter(torch.tensor(1.0))
    if optimizer == "AdamW":
        opt = torch.optim.AdamW([w], lr=0.1, weight_decay=0.1)
    else:
        opt = torch.optim.SGD([w], lr=0.1, momentum=0.9)
    if warm:
        w.grad = torch.tensor(1.0)
        opt.step()
    before = w.detach().clone()
    w.grad = None if grad == "none" else torch.zeros(())
    opt.step()
    return w.item(), opt.state[w], not torch.equal(w, before)


rows, moved = [], {}
for optimizer in ("AdamW", "SGD"):
    for warm in (False, True):
        for grad in ("none", "zero"):
            value, state, moved[optimizer, warm, grad] = one_step(
                optimizer, grad, warm
            )
            rows.append((optimizer, warm, grad, value, state))

results = {
    (opt, warm, grad): (value, sorted(state))
    for opt, warm, grad, value, state in rows
}
steps = {
    (opt, warm, grad): int(state.get("step", 0))
    for opt, warm, grad, _, state in rows
}

# .grad is None: the step leaves the weight exactly as it was, fresh or not,
# and a fresh optimizer creates no state at all.
for opt in ("AdamW", "SGD"):
    assert not moved[(opt, False, "none")] and not moved[(opt, True, "none")]
    assert results[(opt, False, "none")] == (1.0, [])
# The state column, row by row: a zero gradient makes state where None
# does not.
adam_keys = ["exp_avg", "exp_avg_sq", "step"]
assert {key: keys for key, (_, keys) in results.items()} == {
    ("AdamW", False, "none"): [],
    ("AdamW", False, "zero"): adam_keys,
    ("AdamW", True, "none"): adam_keys,
    ("AdamW", True, "zero"): adam_keys,
    ("SGD", False, "none"): [],
    ("SGD", False, "zero"): ["momentum_buffer"],
    ("SGD", True, "none"): ["momentum_buffer"],
    ("SGD", True, "zero"): ["momentum_buffer"],
}

# Fresh AdamW, zero gradient: Adam's own update is 0 / (0 + eps) = 0, but
# decoupled weight decay still multiplies the weight by 1 - lr * wd = 0.99
# (in float32), and state appears.
adamw_fresh_zero, adamw_fresh_state = results[("AdamW", False, "zero")]
assert adamw_fresh_zero == torch.tensor(0.99).item()
assert adamw_fresh_state == ["exp_avg", "exp_avg_sq", "step"]
# Fresh SGD with momentum and no weight decay, zero gradient: nothing to move
# it.
assert results[("SGD", False, "zero")][0] == 1.0

# After one real step: 1.0 -> 0.99 (decay) -> 0.89 (Adam's first step is
# lr * sign(grad)).
after_real_step = torch.tensor(0.99).item() - 0.1
adamw_one_step = results[("AdamW", True, "none")][0]
assert math.isclose(adamw_one_step, after_real_step, rel_tol=1e-6)
# A zero gradient still moves it: decay again, plus the bias-corrected first
# moment m / sqrt(v).
b1, b2, eps = 0.9, 0.999, 1e-8
m_hat = b1 * (1 - b1) / (1 - b1**2)
v_hat = b2 * (1 - b2) / (1 - b2**2)
expected = after_real_step * (1 - 0.1 * 0.1) - 0.1 * m_hat / (
    math.sqrt(v_hat) + eps
)
adamw_zero = results[("AdamW", True, "zero")][0]
assert math.isclose(adamw_zero, expected, rel_tol=1e-6)
assert round(adamw_zero, 6) == 0.814094
# Adam counts its steps per parameter: a skipped parameter's count does not
# advance.
skipped_steps = steps[("AdamW", True, "none")]
zero_steps = steps[("AdamW", True, "zero")]
assert skipped_steps == 1 and zero_steps == 2
assert steps[("AdamW", False, "zero")] == 1  # the fresh row's one step
# SGD with momentum: the buffer (0.9 x 1.0) keeps pushing:
# 0.9 -> 0.9 - 0.1 x 0.9 = 0.81.
sgd_one_step = results[("SGD", True, "none")][0]
sgd_zero = results[("SGD", True, "zero")][0]
assert math.isclose(sgd_one_step, 0.9, rel_tol=1e-6)
assert math.isclose(sgd_zero, 0.81, rel_tol=1e-6)

print(
    f"{'optimizer':<10}{'before':<20}{'this step':<14}{'weight after':<14}state"
)
for optimizer, warm, grad, value, state in rows:
    keys = [
        f"step={int(v)}" if k == "step" else k for k, v in sorted(state.items())
    ]
    before = "one real step" if warm else "fresh (w = 1.0)"
    this = ".grad = None" if grad == "none" else ".grad = 0"
    print(
        f"{optimizer:<10}{before:<20}{this:<14}{value:<14.6f}"
        f"{', '.join(keys) or '(none)'}"
    )
