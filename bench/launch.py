"""How bench starts a measurement's worker processes: `launch`, the one launcher.

A worker is a module of bench/measurements run as `python -m` in the repository, with the lab
importable, OMP_NUM_THREADS=1 and none of an outer torchrun's variables; for W > 1 under
`torchrun --standalone`. Every launch runs under a timeout: a gloo process can hang at exit, and
an overrun kills the launch's whole process group and fails the measurement. Switching bench to
another launcher is an edit of `launch` alone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

# The repository: every process bench starts runs in it.
ROOT = Path(__file__).resolve().parent.parent


def environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "code"), str(ROOT)])
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONWARNINGS"] = "ignore"  # torchrun's OMP_NUM_THREADS notice
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    return env


def command(world_size: int, module: str, args: list[str]) -> list[str]:
    if world_size == 1:
        return [sys.executable, "-m", module, *args]
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    return [*launcher, f"--nproc-per-node={world_size}", "-m", module, *args]


def launch(world_size: int, module: str, args: list[str], timeout: float) -> float:
    """Run to the end and return its wall time; on overrun kill its process group and fail."""
    cmd = command(world_size, module, args)
    start = time.perf_counter()
    with subprocess.Popen(
        cmd,
        env=environment(),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as proc:
        try:
            _, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            _, err = proc.communicate()
            raise RuntimeError(f"timed out after {timeout:.0f} s: {cmd}\n{err[-3000:]}") from None
    if proc.returncode != 0:
        raise RuntimeError(f"exit {proc.returncode}: {cmd}\n{err[-3000:]}")
    return time.perf_counter() - start
