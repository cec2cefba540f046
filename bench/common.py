"""What the benchmarks share: the machine and versions they ran on, timing, and formatting.

The scripts in bench/ import this as `common` (each puts its own folder first on sys.path), so
`python bench/NAME.py` and a test loading the script by its path both find it.
"""

from __future__ import annotations

import datetime
import gc
import importlib.metadata
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parent.parent
# Where `make bench` writes its results; the site reads them from here.
RESULTS_DIR = ROOT / "docs" / "assets" / "bench"

# --- provenance -------------------------------------------------------------------------------


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def ram_gib() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / (1 << 20), 1)
    except OSError:
        pass
    return float("nan")


def filesystem_of(path: Path) -> str:
    """The filesystem type of the mount holding `path` (ext4, tmpfs, ...), from /proc/mounts."""
    try:
        mounts = [line.split() for line in Path("/proc/mounts").read_text().splitlines()]
    except OSError:
        return "unknown"
    resolved = str(path.resolve())
    best = ("", "unknown")
    for fields in mounts:
        point, kind = fields[1], fields[2]
        inside = resolved == point or resolved.startswith(point.rstrip("/") + "/")
        if inside and len(point) > len(best[0]):
            best = (point, kind)
    return best[1]


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def machine(scratch: Path) -> dict[str, Any]:
    return {
        "cpu": cpu_model(),
        "cores": cores(),
        "ram_gib": ram_gib(),
        "os": f"{platform.system()} {platform.release()}",
        "torch_threads": torch.get_num_threads(),
        "scratch_fs": filesystem_of(scratch),
    }


def versions() -> dict[str, str]:
    return {
        "torch": str(torch.__version__),
        "numpy": importlib.metadata.version("numpy"),
        "safetensors": importlib.metadata.version("safetensors"),
        "python": platform.python_version(),
    }


def load_average() -> tuple[float, float, float]:
    """The 1-, 5- and 15-minute load averages (runnable processes; compare with the cores)."""
    return os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3


def utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


# --- measuring --------------------------------------------------------------------------------


def timed(fn: Callable[[], Any]) -> float:
    """Wall time of one call, with the cyclic garbage collector off (as timeit does)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        start = time.perf_counter()
        result = fn()
        elapsed = time.perf_counter() - start
        del result  # tensors are freed by reference counting, outside the timed region
    finally:
        if was_enabled:
            gc.enable()
    return elapsed


def side_by_side(
    variants: dict[str, Callable[[], Any]], repeats: int, before: Callable[[], None] | None = None
) -> dict[str, list[float]]:
    """Time every variant `repeats` times, interleaved, after one untimed warm-up each."""
    names = list(variants)
    for name in names:
        if before:
            before()
        timed(variants[name])
    runs: dict[str, list[float]] = {name: [] for name in names}
    for r in range(repeats):
        order = names if r % 2 == 0 else names[::-1]  # alternate who goes first
        for name in order:
            if before:
                before()
            runs[name].append(timed(variants[name]))
    return runs


# --- reporting --------------------------------------------------------------------------------


def fmt_time(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    ms = seconds * 1e3
    if ms >= 100:
        return f"{ms:.0f} ms"
    if ms >= 10:
        return f"{ms:.1f} ms"
    return f"{ms:.2f} ms"


def fmt_ratio(ratio: float) -> str:
    return f"{ratio:.2f}×" if ratio < 10 else f"{ratio:.0f}×"
