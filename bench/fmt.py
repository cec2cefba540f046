"""How a number reads on a page: times, ratios, sizes, and a comparison put in words.

A comparison names a winner only when verdicts.compare found one (the runs separate); otherwise
it says the two were within noise, and gives both ranges either way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


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


def fmt_duration(seconds: float) -> str:
    """fmt_time, plus microseconds for the sampler's tiny times."""
    return f"{seconds * 1e6:.1f} µs" if seconds < 1e-3 else fmt_time(seconds)


def fmt_speedup(ratio: float) -> str:
    return f"{ratio:,.0f}×" if ratio >= 10 else f"{ratio:.2f}×"


def fmt_bytes(n: float) -> str:
    """Decimal units, two decimals: 1.07 GB."""
    for unit, size in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
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


def short_outcome(c: dict[str, Any], names: dict[str, str]) -> str:
    return f"{names[c['winner']]} faster" if c["winner"] else "within noise"


def listing(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def pytest_summary(counts: dict[str, int]) -> str:
    """pytest's own words: "531 passed, 3 deselected"."""
    return ", ".join(f"{n} {what}" for what, n in counts.items()) or "no tests ran"


def date(timestamp: str) -> str:
    """2026-11-30T09:11:33+00:00 as the page shows it: 2026-11-30 09:11 UTC."""
    day, _, time = timestamp.partition("T")
    return f"{day} {time[:5]} UTC"
