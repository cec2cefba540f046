"""Accumulation under DDP, on two gloo processes on the CPU: each rank runs
`accumulate` on its share of one window; `run_window` starts the ranks."""

import gc
import os
import socket
import tempfile
import time
from contextlib import nullcontext
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

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


def accumulate(rank: int, port: int, out: str) -> None:
    """One rank: its K micro-batches of the window, then one step."""
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group(
        "gloo", rank=rank, world_size=WORLD_SIZE, timeout=timedelta(seconds=30)
    )
    model = DistributedDataParallel(make_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = window_batch()
    mine = slice(rank * K * MICRO, (rank + 1) * K * MICRO)  # this rank's share
    seen = []  # the local .grad after each micro-batch, for the page to check
    for micro, (xb, yb) in enumerate(
        zip(x[mine].split(MICRO), y[mine].split(MICRO), strict=True), start=1
    ):
        last_of_window = micro % K == 0
        with nullcontext() if last_of_window else model.no_sync():
            loss = F.cross_entropy(model(xb), yb) / K
            # inside no_sync: add into the local .grad, nothing sent;
            # outside: add, then average the whole .grad across ranks
            loss.backward()
        seen.append([p.grad.clone() for p in model.parameters()])
        if last_of_window:
            opt.step()
            opt.zero_grad(set_to_none=True)
    torch.save(seen, Path(out) / f"rank{rank}.pt")
    # A gloo process can hang at exit: meet, drop the model, then leave.
    dist.barrier()
    del model, opt
    gc.collect()
    dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))  # port 0: the system picks a free one
        return sock.getsockname()[1]


def run_window(timeout: float = 60.0) -> list[list[list[torch.Tensor]]]:
    """Start the ranks and wait for them; return grads[rank][micro][param]."""
    threads = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = "1"  # each rank inherits it
    with tempfile.TemporaryDirectory() as out:
        try:
            # spawn, not fork: a fresh interpreter inherits no threads or
            # locks from this one; the price is that `accumulate` must be
            # importable, which is why it lives in a file.
            ranks = mp.start_processes(
                accumulate,
                args=(free_port(), out),
                nprocs=WORLD_SIZE,
                join=False,
                start_method="spawn",
            )
        finally:
            if threads is None:
                del os.environ["OMP_NUM_THREADS"]
            else:
                os.environ["OMP_NUM_THREADS"] = threads
        deadline = time.monotonic() + timeout
        try:
            # join() is False while a rank runs and raises if one failed; a
            # rank that hangs fails the run instead of blocking it forever.
            while not ranks.join(
                timeout=max(0.0, deadline - time.monotonic()), grace_period=1
            ):
                if time.monotonic() >= deadline:
                    raise TimeoutError(f"ranks still running after {timeout} s")
        finally:
            for process in ranks.processes:
                if process.is_alive():
                    process.kill()
                    process.join()
        return [
            torch.load(Path(out) / f"rank{rank}.pt")
            for rank in range(WORLD_SIZE)
        ]
