"""What DDP's own all-reduce does with the same local gradients in its
first, second and third update, on every rank that snippets/gloo_ranks.py
starts: the gradients it leaves in .grad, and which parameters its buckets
held, in which order."""

import copy
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import (
    allreduce_hook,
)
from torch.nn.parallel import DistributedDataParallel

from resume_lab.model import build_model

UPDATES = 3


def backward_passes(model: torch.nn.Module, rank: int) -> list[list[Any]]:
    """The same forward and backward pass, UPDATES times: the same local
    gradients each time (no dropout, no optimizer step)."""
    generator = torch.Generator().manual_seed(rank)  # this rank's examples
    x = torch.randn(32, 16, generator=generator)
    y = torch.randint(0, 4, (32,), generator=generator)
    grads = []
    for _ in range(UPDATES):
        model.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    return grads


def ddp_buckets(rank: int, world_size: int) -> dict[str, Any]:
    torch.manual_seed(0)  # the same initial weights on every rank
    model = build_model(dropout=0.0)
    names = [name for name, _ in model.named_parameters()]
    # DDP's own all-reduce, no hook: the gradients it leaves
    reduced = backward_passes(DistributedDataParallel(model), rank)
    # A copy under a hook that writes down each bucket's parameters, then
    # reduces it as DDP does (allreduce_hook: divide by W, all-reduce)
    watched = copy.deepcopy(model)
    name_of = {id(p): name for name, p in watched.named_parameters()}
    buckets: list[list[str]] = []

    def hook(
        state: Any, bucket: dist.GradBucket
    ) -> torch.futures.Future[torch.Tensor]:
        buckets.append([name_of[id(p)] for p in bucket.parameters()])
        return allreduce_hook(state, bucket)

    ddp = DistributedDataParallel(watched)
    ddp.register_comm_hook(None, hook)
    hooked = backward_passes(ddp, rank)  # its sums, to hold against DDP's
    return {
        "names": names,
        "grads": reduced,
        "hooked": hooked,
        "buckets": buckets,
    }
