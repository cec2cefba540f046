"""`python -m bench`: run the measurements, write the results, print what the pages will say.

MEASUREMENTS says which measurement module fills which key of which results file. A file is
written (bench/results.py) once its measurements are done; `make test` (the suite measurement,
last) then runs against the numbers of this very run, and the file is written again with its
time.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from . import provenance, results, views
from .measurements import (
    distributed_save,
    distributed_train,
    hash_speed,
    load_memory,
    loop_overhead,
    sampler_position,
    save_speed,
    serialization,
    suite_time,
)
from .plan import FULL, QUICK, Plan
from .results import RESULTS_DIR

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
    "distributed": (("save", distributed_save), ("train", distributed_train)),
}
SUITE = "performance"  # the file whose `suite` entry times `make test`


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def measure(name: str, plan: Plan, out: Path, suite: bool) -> dict[str, Any]:
    started = provenance.start(Path(tempfile.gettempdir()))
    measured: dict[str, Any] = {}
    for key, module in MEASUREMENTS[name]:
        t = time.perf_counter()
        measured[key] = module.measure(plan)
        load = provenance.load_average()[0]
        log(f"  {name}.{key}: {time.perf_counter() - t:.1f} s (load average {load:.1f})")
    if name == SUITE:
        reason = suite_time.PENDING if plan.suite_repeats else suite_time.QUICK
        measured["suite"] = suite_time.not_measured(reason)
    found = results.assemble(name, plan, measured, started)
    results.write(out, name, found)
    if name == "serialization":  # the page's figure, drawn by the results' view
        views.module(name).plot(found, out / "serialization.png")
    if name == SUITE and suite and plan.suite_repeats:
        log("  performance.suite: make test, then the contract tests")
        found["suite"] = suite_time.measure(plan)
        results.write(out, name, found)
    return found


def show(name: str, found: dict[str, Any]) -> None:
    """Print the tables and verdicts the page will show for these results."""
    shown = views.view(name, found)
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
        stored = results.read(out, SUITE)
        stored["suite"] = suite_time.not_measured(suite_time.PENDING)
        results.write(out, SUITE, stored)  # what the suite's own tests read meanwhile
        stored["suite"] = suite_time.measure(plan)
        results.write(out, SUITE, stored)
        show(SUITE, stored)
        return 0
    for name in names:
        if args.show:
            found = results.read(out, name)
        else:
            log(f"{name} ({plan.mode}), load average {provenance.load_average()[0]:.1f}")
            found = measure(name, plan, out, suite=not args.no_suite)
        show(name, found)
    if not args.show:
        print(f"wrote {', '.join(f'{n}.json' for n in names)} in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
