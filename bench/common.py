"""What the measurements share: where results go, and how a variant is timed."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# Where `make bench` writes its results; the site reads them from here.
RESULTS_DIR = ROOT / "docs" / "assets" / "bench"


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
    variants: dict[str, Callable[[], Any]],
    repeats: int,
    before: Callable[[], None] | None = None,
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


def medians(runs: dict[str, list[float]]) -> dict[str, float]:
    import statistics

    return {name: statistics.median(times) for name, times in runs.items()}
