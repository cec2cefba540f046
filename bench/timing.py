"""How bench times a variant, and what a set of timings lets a page say: the one timing helper.

Measuring (the measurement modules):

- `timed(fn)`: one call's wall time, the cyclic garbage collector off (as timeit does);
- `side_by_side(variants, repeats)`: every variant timed `repeats` times, interleaved and
  alternating who goes first, after one untimed warm-up each, so that a busy moment on the
  machine hits every variant; `medians(runs)`.

Judging (the views), the two rules every comparison and target on the pages follows:

- `compare`: A beats B only when A's slowest run beats B's fastest (the runs do not overlap).
  Otherwise the two are within noise, and the page says so instead of naming a winner.
- `judge`: a target "≤ 1.2× the floor" has a margin of 20 % of the floor. When the floor's own
  runs spread by more than that ((slowest − fastest) ÷ median), this run cannot tell met from
  missed: the target is reported as too noisy to judge.

Reading (the views): `fmt_time`, `fmt_duration`, and `outcome`, a comparison in words. The rule
and its words sit together, so that no page can name a winner the rule did not find.
"""

from __future__ import annotations

import contextlib
import gc
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

TOO_NOISY = "too noisy to judge"

# How one call of a variant is timed: its wall time (`timed`), or, for a variant that times
# itself (after a barrier, the slowest of several ranks), the {name: seconds} it returns.
Clock = Callable[[Callable[[], Any]], "float | dict[str, float]"]

# --- measuring ------------------------------------------------------------------------------


@contextlib.contextmanager
def collector_off() -> Iterator[None]:
    """The cyclic garbage collector off for the block: no collection lands in a timing."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def timed(fn: Callable[[], Any]) -> float:
    """Wall time of one call, with the cyclic garbage collector off (as timeit does)."""
    with collector_off():
        start = time.perf_counter()
        result = fn()
        elapsed = time.perf_counter() - start
        del result  # tensors are freed by reference counting, outside the timed region
    return elapsed


def self_timed(fn: Callable[[], dict[str, float]]) -> dict[str, float]:
    """The clock of a variant that times itself: its own {name: seconds}, collector off."""
    with collector_off():
        return fn()


def side_by_side(
    variants: dict[str, Callable[[], Any]],
    repeats: int,
    before: Callable[[], None] | None = None,
    clock: Clock = timed,
) -> dict[str, list[float]]:
    """Time every variant `repeats` times, interleaved, after one untimed warm-up each.

    `before` runs ahead of every call (clean up, flush); `clock` times one call."""
    names = list(variants)
    for name in names:
        if before:
            before()
        clock(variants[name])
    runs: dict[str, list[float]] = {}
    for r in range(repeats):
        for name in names if r % 2 == 0 else names[::-1]:  # alternate who goes first
            if before:
                before()
            took = clock(variants[name])
            for key, seconds in took.items() if isinstance(took, dict) else [(name, took)]:
                runs.setdefault(key, []).append(seconds)
    return runs


def medians(runs: dict[str, list[float]]) -> dict[str, float]:
    return {name: statistics.median(times) for name, times in runs.items()}


# --- judging --------------------------------------------------------------------------------


def spread(runs: list[float]) -> float:
    """(slowest − fastest) ÷ median: how far apart the same measurement landed in one run."""
    return (max(runs) - min(runs)) / statistics.median(runs)


def compare(runs: dict[str, list[float]], a: str, b: str) -> dict[str, Any]:
    """Which of `a` and `b` was lower (faster, smaller) beyond noise; `winner` None if neither."""
    ra, rb = runs[a], runs[b]
    if max(ra) < min(rb):
        winner, loser = a, b
    elif max(rb) < min(ra):
        winner, loser = b, a
    else:
        winner = loser = None
    return {
        "a": a,
        "b": b,
        "winner": winner,
        "loser": loser,
        "a_range": [min(ra), max(ra)],
        "b_range": [min(rb), max(rb)],
        # how many times lower the winner's median is (1.0 when within noise; None when the
        # winner measured zero, as a peak of memory can: no finite factor)
        "factor": _factor(runs[loser], runs[winner]) if winner and loser else 1.0,
    }


def _factor(loser: list[float], winner: list[float]) -> float | None:
    lowest = statistics.median(winner)
    return statistics.median(loser) / lowest if lowest else None


def judge(
    measured: float | None,
    op: str,
    threshold: float,
    floor_runs: list[float] | None = None,
) -> tuple[bool | None, str]:
    """(met, verdict) for a target. `floor_runs`: the baseline a ratio target divides by; if
    they spread by more than the target's margin (|threshold − 1|), the run is too noisy."""
    if measured is None:
        return None, "not measured"
    if floor_runs is not None and spread(floor_runs) > abs(threshold - 1):
        return None, TOO_NOISY
    met = {"le": measured <= threshold, "ge": measured >= threshold, "lt": measured < threshold}[op]
    if met:
        return True, "met"
    short = (1 - measured / threshold) if op == "ge" else (measured / threshold - 1)
    percent = f"{short * 100:.1f}" if short < 0.1 else f"{short * 100:.0f}"
    return False, f"missed by {percent} %"


# --- reading --------------------------------------------------------------------------------


def fmt_time(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    ms = seconds * 1e3
    if ms >= 100:
        return f"{ms:.0f} ms"
    if ms >= 10:
        return f"{ms:.1f} ms"
    return f"{ms:.2f} ms"


def fmt_duration(seconds: float) -> str:
    """fmt_time, plus microseconds for the sampler's tiny times."""
    return f"{seconds * 1e6:.1f} µs" if seconds < 1e-3 else fmt_time(seconds)


def decimal_size(n: float) -> str:
    """10 MB, 100 MB, 1 GB: the save sizes, named as the pages name them."""
    for unit, size in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= size:
            value = n / size
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.2f} {unit}"
    return f"{n:.0f} B"


def fmt_span(values: list[float], fmt: Callable[[float], str]) -> str:
    low, high = fmt(values[0]), fmt(values[1])
    return low if low == high else f"{low} to {high}"


def outcome(
    c: dict[str, Any],
    names: dict[str, str],
    fmt: Callable[[float], str] = fmt_time,
    verb: str = "was faster than",
    separated: str = "the slowest run beat the fastest",
) -> str:
    """A sentence about one comparison: the winner only if its slowest run beat the other's
    fastest, else "within noise"; the runs' ranges either way."""
    ranges = {c["a"]: c["a_range"], c["b"]: c["b_range"]}
    if c["winner"]:
        w, lo = c["winner"], c["loser"]
        return (
            f"{names[w]} {verb} {names[lo]} ({fmt_span(ranges[w], fmt)} against "
            f"{fmt_span(ranges[lo], fmt)}: {separated})"
        )
    return (
        f"{names[c['a']]} and {names[c['b']]} were within noise of each other "
        f"({fmt_span(ranges[c['a']], fmt)} against {fmt_span(ranges[c['b']], fmt)}: "
        "the runs overlap)"
    )
