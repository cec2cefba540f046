"""What clip_grad_norm_ returns and what it does to the gradients, one contract
at a time."""

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils import (
    clip_grad_norm_,
    clip_grad_value_,
    clip_grads_with_norm_,
    get_total_norm,
)

MAX_NORM = 1.0


def model_with_grads() -> nn.Module:
    """The same small model with the same (large) gradients every time it is
    called."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 32), nn.Tanh(), nn.Linear(32, 4))
    # A loss chosen to give a big gradient.
    model(torch.randn(64, 12)).pow(2).sum().backward()
    return model


def flat_grad(model: nn.Module) -> torch.Tensor:
    """All gradients as the one vector clip_grad_norm_ reasons about."""
    return torch.cat([p.grad.flatten() for p in model.parameters()])


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Byte for byte (torch.equal would take -0.0 for 0.0)."""
    same_kind = a.dtype == b.dtype and a.shape == b.shape
    return same_kind and torch.equal(
        a.flatten().view(torch.uint8), b.flatten().view(torch.uint8)
    )


model = model_with_grads()
before = flat_grad(model)
# The L2 norm of every gradient entry together.
by_hand = before.pow(2).sum().sqrt()
assert by_hand > MAX_NORM  # so clipping has something to do

# 1. The return value is the total norm BEFORE clipping: the number worth
# logging.
held = [p.grad for p in model.parameters()]
pre_clip = clip_grad_norm_(model.parameters(), max_norm=MAX_NORM)
torch.testing.assert_close(pre_clip, by_hand)

# 2. Every gradient was multiplied, in place (the same tensors), by one
# coefficient: min(1, max_norm / (norm + 1e-6)).
assert all(p.grad is g for p, g in zip(model.parameters(), held, strict=True))
coef = min(1.0, MAX_NORM / (pre_clip.item() + 1e-6))
after = flat_grad(model)
torch.testing.assert_close(after, before * coef)

# 3. So the direction is unchanged and, at this max_norm of 1.0, the new norm
# is max_norm to within 1e-6.
assert F.cosine_similarity(after, before, dim=0) > 1 - 1e-6
post_clip = after.norm()
torch.testing.assert_close(post_clip, torch.tensor(MAX_NORM), atol=1e-6, rtol=0)

# 4. A threshold above the norm multiplies by exactly 1.0: the gradients keep
# every bit.
untouched = model_with_grads()
clip_grad_norm_(untouched.parameters(), max_norm=1e6)
assert same_bits(flat_grad(untouched), before)


def one_grad(value: float) -> torch.nn.Parameter:
    """A parameter whose gradient is the one entry `value`."""
    p = torch.nn.Parameter(torch.zeros(1))
    p.grad = torch.tensor([value])
    return p


# ... as long as norm + 1e-6 is below max_norm by more than float32 round-off:
# a norm just under max_norm, within the guard, can already be scaled (a
# little).
clear, near = one_grad(MAX_NORM - 1e-3), one_grad(MAX_NORM - 5e-7)
clear_before, near_before = clear.grad.clone(), near.grad.clone()
clip_grad_norm_([clear], MAX_NORM)
clip_grad_norm_([near], MAX_NORM)
assert same_bits(clear.grad, clear_before)
assert near.grad < near_before

# Over 500 random max_norm from 0.01 to 10, the four largest float32 norms
# with norm + 1e-6 <= limit: with max_norm itself for the limit, round-off
# scales some of them; with a margin of a millionth of max_norm, none.
zero = torch.zeros(1)
draws = torch.empty(500, dtype=torch.float64).uniform_(
    -2, 1, generator=torch.Generator().manual_seed(0)
)
scaled = {"boundary": 0, "margin": 0}
for max_norm in (10**draws).tolist():
    for case, limit in (
        ("boundary", max_norm),
        ("margin", max_norm * (1 - 1e-6)),
    ):
        norm = torch.tensor([limit - 1e-6])  # in float32: it may round up
        while norm.item() + 1e-6 > limit:
            norm = torch.nextafter(norm, zero)
        for _ in range(4):
            p = one_grad(norm.item())
            clip_grad_norm_([p], max_norm)
            scaled[case] += not same_bits(p.grad, norm)
            norm = torch.nextafter(norm, zero)
assert scaled["boundary"] > 0 and scaled["margin"] == 0

# 5. The two public halves do the same arithmetic: the same bits.
two_step = model_with_grads()
total = get_total_norm([p.grad for p in two_step.parameters()])
clip_grads_with_norm_(two_step.parameters(), MAX_NORM, total)
assert same_bits(total, pre_clip) and same_bits(flat_grad(two_step), after)

# 6. clip_grad_value_ clamps each entry on its own: bounded entries, a
# different direction.
VALUE = 0.01
by_value = model_with_grads()
clip_grad_value_(by_value.parameters(), clip_value=VALUE)
clamped = flat_grad(by_value)
assert clamped.abs().max() <= VALUE
cosine = F.cosine_similarity(clamped, before, dim=0)
assert cosine < 0.99, cosine

print(
    f"pre-clip norm {pre_clip.item():.4f} -> "
    f"post-clip norm {post_clip.item():.6f}"
)
print(
    f"clip_grad_value_({VALUE}): cosine with the unclipped gradient "
    f"{cosine.item():.3f}"
)
