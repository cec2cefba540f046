"""Start W gloo ranks on this machine, run one function in each, and return
what each returned; a rank that fails or hangs fails the call, within a
timeout. The accumulation and Scaling out pages run their workers with it.

The ranks are forked from a server process (multiprocessing's forkserver)
that has imported PRELOAD and runs one thread: a rank inherits no other
thread's locks, as with spawn, and finds torch imported, unlike spawn. The
server starts once per process and serves every later call."""

import gc
import os
import socket
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

# What the server imports before it forks any rank, instead of __main__
# (the default): the script this process was started with.
PRELOAD = ["torch", "torch.distributed.checkpoint"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))  # port 0: the system picks a free one
        return sock.getsockname()[1]


def _rank_main(
    rank: int,
    world_size: int,
    port: int,
    out: str,
    worker: Callable[..., Any],
    args: tuple[Any, ...],
) -> None:
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world_size))
    dist.init_process_group(
        "gloo", rank=rank, world_size=world_size, timeout=timedelta(seconds=60)
    )
    result = worker(rank, world_size, *args)
    torch.save(result, Path(out) / f"rank{rank}.pt")
    # every rank meets the others, drops its result, then leaves the group
    dist.barrier()
    del result
    gc.collect()
    dist.destroy_process_group()


def run_ranks(
    worker: Callable[..., Any],
    world_size: int,
    *args: Any,
    timeout: float = 120.0,
) -> list[Any]:
    """worker(rank, world_size, *args) in each of `world_size` new
    processes; returns their results in rank order."""
    threads = os.environ.get("OMP_NUM_THREADS")
    # the server, started by the first call, inherits it (and each rank
    # sets one thread itself)
    os.environ["OMP_NUM_THREADS"] = "1"
    with tempfile.TemporaryDirectory() as out:
        try:
            # each rank imports the worker by its module name: it must live
            # in an importable file, not in a page's block
            mp.get_context("forkserver").set_forkserver_preload(PRELOAD)
            ranks = mp.start_processes(
                _rank_main,
                args=(world_size, free_port(), out, worker, args),
                nprocs=world_size,
                join=False,
                start_method="forkserver",
            )
        finally:
            if threads is None:
                del os.environ["OMP_NUM_THREADS"]
            else:
                os.environ["OMP_NUM_THREADS"] = threads
        deadline = time.monotonic() + timeout
        try:
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
            torch.load(Path(out) / f"rank{rank}.pt", weights_only=False)
            for rank in range(world_size)
        ]


def parent(rank: int, world_size: int) -> dict[str, Any]:
    """A worker that describes the process its rank was forked from: its
    pid, its number of threads, and whether it has torch's library loaded
    (Linux's /proc)."""
    server = Path(f"/proc/{os.getppid()}")
    status = (server / "status").read_text().splitlines()
    threads = next(line for line in status if line.startswith("Threads:"))
    return {
        "pid": os.getppid(),
        "threads": int(threads.split()[1]),
        "torch": "libtorch_cpu.so" in (server / "maps").read_text(),
    }
