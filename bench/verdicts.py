"""What a set of timings lets the page say: who won, or that it was within noise.

Two rules, used for every comparison and every target the performance page states:

- A beats B only when A's slowest run beats B's fastest (the runs do not overlap). Otherwise the
  two are within noise, and the page says so instead of naming a winner.
- A target "≤ 1.2× the floor" has a margin of 20 % of the floor. When the floor's own runs spread
  by more than that ((slowest − fastest) ÷ median), this run cannot tell met from missed: the
  target is reported as too noisy to judge.
"""

from __future__ import annotations

import statistics
from typing import Any

TOO_NOISY = "too noisy to judge"


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
