"""`python -m bench`: run the measurements, print what the pages will say, write the results.

Each results file is a list of measurements, each a module with `measure(plan) -> dict`. A file
is written once its measurements are done; `make test` (the suite measurement, last) then runs
against the numbers of this very run, and the file is written again with its time.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from . import (
    distributed,
    hash_speed,
    load_memory,
    loop_overhead,
    provenance,
    sampler_position,
    save_speed,
    serialization,
    suite_time,
    views,
)
from .common import RESULTS_DIR
from .plan import FULL, QUICK, Plan

# results file -> (key in it, measurement); the suite runs last, after the file is written.
MEASUREMENTS: dict[str, tuple[tuple[str, ModuleType], ...]] = {
    "serialization": (("sizes", serialization),),
    "performance": (
        ("sampler", sampler_position),
        ("save", save_speed),
        ("hashing", hash_speed),
        ("verify_load", load_memory),
        ("loop", loop_overhead),
    ),
    "distributed": (("measured", distributed),),
}
SUITE = "performance"  # the file whose `suite` entry times `make test`


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def plan_of(name: str, plan: Plan) -> dict[str, Any]:
    """The part of the plan a results file was measured with."""
    if name == "distributed":  # its own settings are in measured.setup
        return {"mode": plan.mode}
    fields = dataclasses.asdict(plan)
    mine = name == "serialization"
    return {k: v for k, v in fields.items() if k == "mode" or k.startswith("serialization") == mine}


def write(name: str, results: dict[str, Any], out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.json"
    path.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", "utf8")
    return path


def measure(name: str, plan: Plan, out: Path, suite: bool) -> dict[str, Any]:
    started = provenance.start(Path(tempfile.gettempdir()))
    results: dict[str, Any] = {"plan": plan_of(name, plan)}
    for key, module in MEASUREMENTS[name]:
        t = time.perf_counter()
        results[key] = module.measure(plan)
        load = provenance.load_average()[0]
        log(f"  {name}.{key}: {time.perf_counter() - t:.1f} s (load average {load:.1f})")
    if name == SUITE:
        reason = suite_time.PENDING if plan.suite_repeats else suite_time.QUICK
        results["suite"] = suite_time.not_measured(reason)
    results["provenance"] = provenance.finish(started, mode=plan.mode)
    if name == "serialization":
        out.mkdir(parents=True, exist_ok=True)
        serialization.plot(results, out / "serialization.png")
    write(name, results, out)
    if name == SUITE and suite and plan.suite_repeats:
        log("  performance.suite: make test, then the contract tests")
        results["suite"] = suite_time.measure(plan)
        write(name, results, out)
    return results


def show(name: str, results: dict[str, Any]) -> None:
    """Print the tables and verdicts the page will show for these results."""
    shown = views.view(name, results)
    print(f"## {name}: {shown['provenance']['date']}, {shown['provenance']['summary']}\n")
    for key, value in shown.items():
        if key.endswith("table_md"):
            print(value, end="\n\n")
    for key, t in shown.get("targets", {}).items():
        print(f"  {key}: {t['what']}: {t['measured']} (target {t['target']}) {t['verdict']}")
    if "hash_choice" in shown:
        print(f"  {shown['hash_choice']['sentence']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="tiny sizes, no suite; a temporary folder unless --out"
    )
    parser.add_argument("--out", type=Path, help=f"results folder (default {RESULTS_DIR})")
    parser.add_argument(
        "--only", choices=list(MEASUREMENTS), action="append", help="one results file (repeatable)"
    )
    parser.add_argument(
        "--no-suite", action="store_true", help="leave the suite pending (then --suite-only)"
    )
    parser.add_argument(
        "--suite-only", action="store_true", help="time only the suite, into the stored results"
    )
    parser.add_argument(
        "--show", action="store_true", help="measure nothing: print the stored results"
    )
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    # Never let smoke-test numbers replace the committed results by accident.
    out = args.out or (Path(tempfile.mkdtemp(prefix="bench-quick-")) if args.quick else RESULTS_DIR)
    names = args.only or list(MEASUREMENTS)
    if args.suite_only:
        stored = json.loads((out / f"{SUITE}.json").read_text("utf8"))
        stored["suite"] = suite_time.not_measured(suite_time.PENDING)
        write(SUITE, stored, out)  # what the suite's own tests read meanwhile
        stored["suite"] = suite_time.measure(plan)
        write(SUITE, stored, out)
        show(SUITE, stored)
        return 0
    for name in names:
        if args.show:
            results = json.loads((out / f"{name}.json").read_text("utf8"))
        else:
            log(f"{name} ({plan.mode}), load average {provenance.load_average()[0]:.1f}")
            results = measure(name, plan, out, suite=not args.no_suite)
        show(name, results)
    if not args.show:
        print(f"wrote {', '.join(f'{n}.json' for n in names)} in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
