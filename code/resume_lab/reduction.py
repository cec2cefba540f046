"""A gradient reduction whose order depends on neither the world size nor the
engine's bucket layout.

Every logical shard's gradient reaches every rank (an all-gather), and each
rank adds them in shard order: shard 0, then 1, then 2, ... One process
computing all shards adds them in the same order, so the sum is the same
float, bit for bit, at any world size. Plain DDP instead sums whatever its
buckets hold in gloo's order, which changes when the buckets are rebuilt
after the first update.
"""

from typing import Any

import torch
import torch.distributed as dist


# --8<-- [start:fold]
def fold(rows: torch.Tensor) -> torch.Tensor:
    """rows[0] + rows[1] + ... + rows[-1], strictly left to right."""
    total = rows[0].clone()
    for row in rows[1:]:
        total += row
    return total


# --8<-- [end:fold]


class ShardReduction:
    """Collects each logical shard's gradient, one call per owned shard (the
    engine's synced backward of that shard), and adds them in shard order
    once the rank has handed over its last one.

    Gradients arrive as named pieces (a parameter, a DDP bucket's slice of
    it, FSDP's flat buffer): the fold is element by element, so it does not
    matter how an engine packs them, or that DDP repacks its buckets after
    the first update.
    """

    def __init__(self, shards: int, group: Any = None) -> None:
        self.shards = shards
        self.group = group
        self.world = dist.get_world_size(group) if dist.is_initialized() else 1
        self.per_rank = shards // self.world
        self.slot = 0  # which of this rank's shards the next backward is
        self._rows: dict[Any, list[torch.Tensor | None]] = {}

    def gather(self, local: torch.Tensor) -> list[torch.Tensor]:
        """Every rank's `local`, in rank order."""
        if self.world == 1:
            return [local.clone()]
        gathered = [torch.empty_like(local) for _ in range(self.world)]
        dist.all_gather(gathered, local.contiguous(), group=self.group)
        return gathered

    def collect(
        self, pieces: dict[Any, torch.Tensor]
    ) -> dict[Any, torch.Tensor] | None:
        """Hand over this rank's gradient of shard slot `self.slot`; returns
        the shard-ordered sums once every slot is in, else None."""
        names = list(pieces)
        sizes = [pieces[name].numel() for name in names]
        flat = torch.cat([pieces[name].reshape(-1) for name in names])
        for rank, row in enumerate(self.gather(flat)):
            # ranks own contiguous blocks: rank r's slot j is shard r*m + j
            shard = rank * self.per_rank + self.slot
            for name, part in zip(names, row.split(sizes), strict=True):
                self._rows.setdefault(name, [None] * self.shards)[shard] = part
        if self.slot < self.per_rank - 1:
            return None
        totals = {}
        for name in names:
            rows = self._rows.pop(name)
            assert all(row is not None for row in rows), name
            totals[name] = fold(torch.stack(rows)).view_as(pieces[name])  # type: ignore[arg-type]
        return totals

    def fold_losses(self, local: torch.Tensor) -> torch.Tensor:
        """The window's loss: per-shard losses gathered, added in shard
        order."""
        return fold(torch.cat(self.gather(local)))


# No `from __future__ import annotations` in this module: DDP checks that
# the hook's bucket annotation is dist.GradBucket itself, not a string.
def ddp_fixed_order_hook(
    state: ShardReduction, bucket: dist.GradBucket
) -> torch.futures.Future[torch.Tensor]:
    """DDP comm hook: the bucket holds this rank's gradient of one shard;
    once the last shard is in, the bucket gets the shard-ordered sum (before
    that it is returned unchanged and the Trainer discards it)."""
    views = dict(
        zip(map(id, bucket.parameters()), bucket.gradients(), strict=True)
    )
    totals = state.collect(views)
    if totals is not None:
        for name, view in views.items():
            view.copy_(totals[name])
    future: torch.futures.Future[torch.Tensor] = torch.futures.Future()
    future.set_result(bucket.buffer())
    return future


class FixedOrderReduceScatter:
    """FSDP2's reduce-scatter, replaced (fully_shard's public
    set_custom_reduce_scatter): gather every rank's unsharded gradient of one
    shard, keep this rank's chunk, add in shard order. It has the two methods
    of FSDP2's ReduceScatter interface, which torch 2.13 does not export."""

    def __init__(self, reduction: ShardReduction) -> None:
        self.reduction = reduction

    def allocate(
        self,
        size: Any,
        *,
        dtype: torch.dtype,
        device: torch.device,
    ) -> torch.Tensor:
        return torch.empty(*size, dtype=dtype, device=device)

    def __call__(
        self,
        output_tensor: torch.Tensor,
        input_tensor: torch.Tensor,
        group: Any,
        op: Any,
        async_op: bool = False,
    ) -> dist.Work | None:
        # the op (an average) is ignored on purpose: the loss is already
        # divided by the window's example count, so gradients are summed
        chunk = output_tensor.numel()
        rank = dist.get_rank(group)
        totals = self.reduction.collect({"flat": input_tensor})
        if totals is not None:
            total = totals["flat"]
            output_tensor.copy_(total[rank * chunk : (rank + 1) * chunk])
        else:
            output_tensor.zero_()
        return None


# --8<-- [start:grad_norm]
def full_gradients(parameters: list[torch.nn.Parameter]) -> list[torch.Tensor]:
    """Each parameter's whole gradient, gathered if FSDP holds it in pieces."""
    grads = []
    for p in parameters:
        assert p.grad is not None
        grad = p.grad
        if hasattr(grad, "full_tensor"):  # a DTensor shard
            grad = grad.full_tensor()
        grads.append(grad)
    return grads


def clip_in_fixed_order(
    parameters: list[torch.nn.Parameter], max_norm: float
) -> torch.Tensor:
    """clip_grad_norm_'s arithmetic on whole gradients, so the norm (and the
    clip) is the same float whether the gradient lives on one rank or is
    sharded over several. Raises on a NaN or inf norm."""
    norms = [
        torch.linalg.vector_norm(g, 2.0) for g in full_gradients(parameters)
    ]
    total = torch.linalg.vector_norm(torch.stack(norms), 2.0)
    if not torch.isfinite(total):
        raise RuntimeError(
            f"the total norm of gradients is {total.item()}: non-finite; "
            "the run stops instead of stepping on it"
        )
    coefficient = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    for p in parameters:
        assert p.grad is not None
        p.grad.mul_(coefficient)
    return total


# --8<-- [end:grad_norm]
