"""Accumulation under DDP, on two gloo processes on the CPU: each rank runs
`accumulate` on its share of one window; `run_window` starts the ranks."""

from contextlib import nullcontext

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

# starts W gloo ranks, joins each to the group, collects what each returns
from snippets.gloo_ranks import run_ranks

WORLD_SIZE = 2  # processes (ranks)
K = 2  # micro-batches per rank in one window
MICRO = 4  # examples per micro-batch
WINDOW = WORLD_SIZE * K * MICRO  # examples in one update


def make_model() -> nn.Module:
    torch.manual_seed(0)  # the same initial weights in every process
    return nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3))


def window_batch() -> tuple[torch.Tensor, torch.Tensor]:
    """The window's examples, the same in every process."""
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(WINDOW, 8, generator=gen)
    return x, torch.randint(0, 3, (WINDOW,), generator=gen)


def accumulate(
    rank: int, world_size: int, no_sync: bool = True
) -> list[list[torch.Tensor]]:
    """One rank, inside a gloo process group: its K micro-batches of the
    window, then one step; returns its .grad after each micro-batch.
    no_sync=False: every micro-batch synchronizes (exercise 3)."""
    model = DistributedDataParallel(make_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = window_batch()
    mine = slice(rank * K * MICRO, (rank + 1) * K * MICRO)  # this rank's share
    seen = []  # the local .grad after each micro-batch, for the page to check
    for micro, (xb, yb) in enumerate(
        zip(x[mine].split(MICRO), y[mine].split(MICRO), strict=True), start=1
    ):
        last_of_window = micro % K == 0
        synced = last_of_window or not no_sync
        with nullcontext() if synced else model.no_sync():
            loss = F.cross_entropy(model(xb), yb) / K
            # inside no_sync: add into the local .grad, no all-reduce;
            # outside: add, then average the whole .grad across ranks
            loss.backward()
        seen.append([p.grad.clone() for p in model.parameters()])
        if last_of_window:
            opt.step()
            opt.zero_grad(set_to_none=True)
    return seen


def run_window(
    timeout: float = 60.0, no_sync: bool = True
) -> list[list[list[torch.Tensor]]]:
    """Start the ranks (each joins the group before `accumulate` runs) and
    wait for them; return grads[rank][micro][param]."""
    return run_ranks(accumulate, WORLD_SIZE, no_sync, timeout=timeout)
