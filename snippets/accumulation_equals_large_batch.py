"""Accumulating K micro-batches gives the large-batch gradient, if the loss is
scaled right."""

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(10, 32), nn.Tanh(), nn.Linear(32, 3))
inputs, labels = torch.randn(32, 10), torch.randint(0, 3, (32,))
N = len(labels)  # examples in the window: one update's worth


def flat_grad(chunk_sizes: list[int], loss_of) -> torch.Tensor:
    """Backward once per chunk with loss = loss_of(logits, labels); return
    all grads."""
    net.zero_grad(set_to_none=True)
    for xb, yb in zip(
        inputs.split(chunk_sizes), labels.split(chunk_sizes), strict=True
    ):
        loss_of(net(xb), yb).backward()  # .grad += this chunk's gradient
    return torch.cat([p.grad.flatten() for p in net.parameters()])


def summed(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits, y, reduction="sum")


def worst(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a - b).abs().max().item()


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit for bit: compared as integers (torch.equal takes -0.0 for 0.0)."""
    return torch.equal(a.view(torch.int32), b.view(torch.int32))


big_batch = flat_grad([N], F.cross_entropy)  # one batch of 32, mean loss

# Four equal micro-batches of 8: each micro-batch mean, divided by K.
K = 4
accumulated = flat_grad([8] * K, lambda out, y: F.cross_entropy(out, y) / K)
forgot_k = flat_grad([8] * K, F.cross_entropy)  # the bug: never divided by K
# The window's rule on equal micro-batches: summed losses over the window's N.
window_rule = flat_grad([8] * K, lambda out, y: summed(out, y) / N)

# A short tail: chunks of 12, 12 and 8 make a window of three micro-batches.
uneven = [12, 12, 8]
# Wrong: the 8 weigh as much as 12.
mean_over_k = flat_grad(
    uneven, lambda out, y: F.cross_entropy(out, y) / len(uneven)
)
# Right: summed losses over the window's examples.
sum_over_n = flat_grad(uneven, lambda out, y: summed(out, y) / N)

err_accumulated = worst(accumulated, big_batch)
err_forgot = worst(forgot_k, K * big_batch)
err_mean_over_k = worst(mean_over_k, big_batch)
err_sum_over_n = worst(sum_over_n, big_batch)

# Contracts. Round-off is ~1e-8 for float32 gradients of this size; the bug is
# far above it.
assert err_accumulated < 1e-7
assert worst(window_rule, accumulated) < 1e-7  # the same gradient, equal sizes
assert err_sum_over_n < 1e-7
assert 1e-3 < err_mean_over_k < 1e-1
assert err_mean_over_k > 1e5 * err_sum_over_n
# Forgetting 1/K multiplies the accumulated gradient by exactly K (K = 4 is a
# power of two)...
assert same_bits(forgot_k, K * accumulated)
# ...and so matches K x the big batch only to round-off, not bitwise.
assert 0 < err_forgot < 1e-6

print("max abs difference from the batch of 32 (forgot: from K x it)")
print(f"  {K} x 8, mean / K        {err_accumulated:.2e}")
print(f"  {K} x 8, forgot / K      {err_forgot:.2e}")
print(f"  12+12+8, mean / K      {err_mean_over_k:.2e}")
print(f"  12+12+8, sum / {N}      {err_sum_over_n:.2e}")
print(
    f"forgot / K == {K} x accumulated, bitwise: "
    f"{same_bits(forgot_k, K * accumulated)}"
)
