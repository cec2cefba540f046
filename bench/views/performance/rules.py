"""The performance view's rules and units: the targets, what each compares, and how a number
reads on the page (decimal bytes, GB/s, speed-ups)."""

from __future__ import annotations

from typing import Any

from ...timing import judge, spread

GB = 10**9
HASH_NAMES = {"blake3": "BLAKE3", "sha256": "SHA-256"}
LOAD_LABELS = {
    "load_checkpoint": "the lab's load_checkpoint(): verify from the open file, then torch.load "
    "from it",
    "meta_mmap": "verify(); meta-device model; torch.load(mmap=True); load_state_dict(assign=True)",
    "plain": "model built on CPU; verify(); torch.load(); load_state_dict()",
}
# (what is compared, comparison, threshold). "le": measured <= threshold.
TARGETS = {
    "sampler_flat": ("start at the largest k ÷ start at the smallest k (order drawn)", "le", 2.0),
    "sampler_speedup": ("replay of k batches ÷ start at k, largest k (order drawn)", "ge", 1000.0),
    "save_overhead": ("save_checkpoint ÷ (torch.save + one fsync), largest size", "le", 1.2),
    "verify_throughput": ("verify() of the load checkpoint, default hash, GB/s", "ge", 1.0),
    "load_peak": (
        "load_checkpoint: peak extra resident memory ÷ state bytes, worst run",
        "le",
        1.1,
    ),
    "loop_throughput": ("Trainer + callbacks updates/s ÷ bare loop updates/s", "ge", 0.95),
    "suite_make_test": ("`make test` wall time, s", "lt", 60.0),
    "suite_contract": ("the lab's contract tests alone, wall time, s", "lt", 5.0),
}


def target(key: str, measured: float | None, floor_runs: list[float] | None = None) -> dict:
    """Target `key` judged (timing.judge); a ratio target against the runs of its floor."""
    what, op, threshold = TARGETS[key]
    met, verdict = judge(measured, op, threshold, floor_runs)
    sign = {"le": "≤", "ge": "≥", "lt": "<"}[op]
    out = {"what": what, "target": f"{sign} {threshold:g}", "threshold": threshold}
    out |= {"measured": measured, "met": met, "verdict": verdict}
    if floor_runs is not None:
        out |= {"floor_spread": spread(floor_runs), "margin": abs(threshold - 1)}
    return out


def size_verdict(size: dict[str, Any]) -> tuple[bool | None, str]:
    """The save target applied to one size (the target itself is judged at the largest)."""
    _, op, threshold = TARGETS["save_overhead"]
    return judge(size["ratio"], op, threshold, size["runs_s"]["floor"])


def mark(met: bool | None, verdict: str) -> str:
    return verdict if met is None else ("met" if met else "**missed**")


# --- how a number reads on this page ------------------------------------------------------


def gbps(size: float, seconds: float) -> str:
    return f"{size / seconds / GB:.2f} GB/s"


def fmt_speedup(ratio: float) -> str:
    return f"{ratio:,.0f}×" if ratio >= 10 else f"{ratio:.2f}×"


def fmt_bytes(n: float) -> str:
    """Decimal units, two decimals: 1.07 GB."""
    for unit, size in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n:.0f} B"


def listing(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def pytest_summary(counts: dict[str, int]) -> str:
    """pytest's own words: "531 passed, 3 deselected"."""
    return ", ".join(f"{n} {what}" for what, n in counts.items()) or "no tests ran"
