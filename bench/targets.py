"""The page's targets, each judged by verdicts.judge: met, missed, or too noisy to judge."""

from __future__ import annotations

from typing import Any

from .fmt import fmt_duration, pytest_summary
from .verdicts import TOO_NOISY, judge, spread

__all__ = ["HASH_NAMES", "TARGETS", "TOO_NOISY", "evaluate_targets", "mark", "size_verdict"]

HASH_NAMES = {"blake3": "BLAKE3", "sha256": "SHA-256"}
SUITE_NOT_MEASURED = {
    "pending": "pending: make bench writes these results, then measures the suite",
    "quick": "quick mode: the suite would run this benchmark's test",
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


def target(
    key: str, measured: float | None, detail: str = "", floor_runs: list[float] | None = None
) -> dict[str, Any]:
    what, op, threshold = TARGETS[key]
    met, verdict = judge(measured, op, threshold, floor_runs)
    sign = {"le": "≤", "ge": "≥", "lt": "<"}[op]
    out = {
        "what": what,
        "target": f"{sign} {threshold:g}",
        "threshold": threshold,
        "measured": measured,
        "met": met,
        "verdict": verdict,
        "detail": detail,
    }
    if floor_runs is not None:
        out |= {"floor_spread": spread(floor_runs), "margin": abs(threshold - 1)}
    return out


def evaluate_targets(results: dict[str, Any]) -> dict[str, Any]:
    sampler, save, load = results["sampler"], results["save"], results["verify_load"]
    loop, suite = results["loop"], results["suite"]
    largest = list(save.values())[-1]
    first = sampler["per_k"][f"k_{sampler['ks'][0]}"]
    lab = load["paths"]["load_checkpoint"]
    targets = {
        "sampler_flat": target(
            "sampler_flat",
            sampler["flat_ratio"],
            f"cold (permutation drawn first): {sampler['cold_flat_ratio']:.2f}",
            floor_runs=first["runs_s"]["start"],
        ),
        "sampler_speedup": target(
            "sampler_speedup",
            sampler["speedup"],
            f"cold: {sampler['cold_speedup']:.1f}× (both draw the epoch's permutation, "
            f"{fmt_duration(sampler['permutation_s'])})",
        ),
        "save_overhead": target(
            "save_overhead",
            largest["ratio"],
            "; ".join(f"{s['label']}: {s['ratio']:.2f}" for s in save.values()),
            floor_runs=largest["runs_s"]["floor"],
        ),
        "verify_throughput": target(
            "verify_throughput",
            load["verify"]["gb_per_s"],
            f"{HASH_NAMES.get(load['hash'], load['hash'])}, from the page cache",
        ),
        "load_peak": target(
            "load_peak",
            lab["peak_ratio_max"],
            f"median {lab['peak_ratio']:.3f}; "
            f"plain load: {load['paths']['plain']['peak_ratio']:.2f}",
        ),
        "loop_throughput": target(
            "loop_throughput", loop["ratio"], floor_runs=loop["runs_s"]["bare"]
        ),
    }
    if suite["measured"]:
        for key, part in (("suite_make_test", "make_test"), ("suite_contract", "contract")):
            measured = suite[part]
            targets[key] = target(key, measured["wall_s"], pytest_summary(measured["counts"]))
            if not measured["passed"]:  # a failing suite is not fast, it is broken
                targets[key] |= {"met": False, "verdict": "failed: the tests did not pass"}
    else:
        why = SUITE_NOT_MEASURED.get(suite["reason"], suite["reason"])
        targets["suite_make_test"] = target("suite_make_test", None, why)
        targets["suite_contract"] = target("suite_contract", None, why)
    return targets


def size_verdict(size: dict[str, Any]) -> tuple[bool | None, str]:
    """The save target applied to one size (the target itself is judged at the largest)."""
    _, op, threshold = TARGETS["save_overhead"]
    return judge(size["ratio"], op, threshold, size["runs_s"]["floor"])


def mark(met: bool | None, verdict: str) -> str:
    if met is None:
        return verdict
    return "met" if met else "**missed**"
