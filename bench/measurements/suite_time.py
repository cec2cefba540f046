"""The suite: `make test` and the lab's contract tests alone, each as a subprocess, timed.

`make bench` writes its results before it measures the suite (with the suite pending), so the
suite it times is the one that checks the numbers of this very run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path
from statistics import median
from typing import Any

from .. import provenance
from ..launch import ROOT
from ..plan import Plan

CONTRACT_TESTS = "tests/lab/test_lab_contract.py"
# Why the suite was not measured: it is measured last, or a quick run would run its own test.
PENDING, QUICK = "pending", "quick"

# "==== 427 passed, 3 deselected in 98.39s (0:01:38) ====", or with -q "11 passed in 3.22s"
PYTEST_SUMMARY = re.compile(
    r"^(?:=+ )?(?P<summary>\d+ \w+.*?) in (?P<seconds>[\d.]+)s(?: \([\d:]+\))?(?: =+)?$"
)
COUNT = re.compile(r"(?P<count>\d+) (?P<what>\w+)")
# A line of pytest --durations: "30.64s setup    tests/browser/test_pages.py::test_x[index.html]"
DURATION = re.compile(r"^(?P<seconds>[\d.]+)s (?:setup|call|teardown)\s+(?P<path>[^:\s]+)")
# pytest-xdist's "created: 2/2 workers"; no such line: one process
WORKERS = re.compile(r"^created: (?P<workers>\d+)/\d+ workers?$")


def not_measured(reason: str) -> dict[str, Any]:
    return {"measured": False, "reason": reason}


def time_by_folder(output: str) -> dict[str, float]:
    """Seconds per test folder (tests/lab, docs, ...) from pytest's --durations=0 report."""
    folders: dict[str, float] = {}
    for line in output.splitlines():
        if match := DURATION.match(line.strip()):
            parts = match["path"].split("/")
            folder = "/".join(parts[:2]) if parts[0] == "tests" and len(parts) > 2 else parts[0]
            folders[folder] = folders.get(folder, 0.0) + float(match["seconds"])
    return {k: round(v, 1) for k, v in sorted(folders.items(), key=lambda kv: -kv[1])}


def workers(output: str) -> int:
    """How many pytest-xdist workers ran the tests (1 without xdist)."""
    found = [
        int(m["workers"]) for line in output.splitlines() if (m := WORKERS.match(line.strip()))
    ]
    return found[-1] if found else 1


def counts(summary: str) -> dict[str, int]:
    """{"passed": 427, "deselected": 3} from pytest's summary line."""
    return {m["what"]: int(m["count"]) for m in COUNT.finditer(summary)}


def timed_command(command: list[str], folder: Path, durations: bool = False) -> dict[str, Any]:
    # as the Makefile runs them: compiled files under .venv/, none in the tree
    env = {
        **os.environ,
        "PYTHONPYCACHEPREFIX": str(ROOT / ".venv" / "pycache"),
        "NO_MKDOCS_2_WARNING": "1",
    }
    if durations:  # the report costs nothing and says where the time goes
        env["PYTEST_ADDOPTS"] = f"{env.get('PYTEST_ADDOPTS', '')} --durations=0".strip()
    start = time.perf_counter()
    proc = subprocess.run(command, cwd=folder, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    summaries = [
        m for line in proc.stdout.splitlines() if (m := PYTEST_SUMMARY.match(line.strip()))
    ]
    last = summaries[-1] if summaries else None
    problems = [
        line.strip()[:200]
        for line in proc.stdout.splitlines()
        if line.startswith(("FAILED ", "ERROR ", "make: ***"))
    ]
    for line in problems[:20]:  # what failed is printed, not stored
        print(f"    {line}", file=sys.stderr)
    return {
        "wall_s": wall,
        "returncode": proc.returncode,
        # each test's own time, summed: over all workers, so the sum can exceed the wall time
        "by_folder_s": time_by_folder(proc.stdout) if durations else {},
        "workers": workers(proc.stdout),
        "pytest_s": float(last["seconds"]) if last else None,
        "counts": counts(last["summary"]) if last else {},
    }


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "wall_s": median([r["wall_s"] for r in runs]),
        "pytest_s": median([r["pytest_s"] or 0.0 for r in runs]),
        "passed": all(r["returncode"] == 0 for r in runs),
        "counts": runs[-1]["counts"],
        "by_folder_s": runs[-1]["by_folder_s"],
        "workers": runs[-1].get("workers", 1),
        "runs": runs,
    }


def measure(plan: Plan, folder: Path = ROOT) -> dict[str, Any]:
    """`make test` and the contract tests alone, run in `folder` (a checkout of this repo)."""
    if plan.suite_repeats == 0:
        return not_measured(QUICK)
    make = os.environ.get("MAKE", "make")
    contract_cmd = [sys.executable, "-m", "pytest", "-q", CONTRACT_TESTS]
    make_runs = [
        timed_command([make, "--no-print-directory", "test"], folder, durations=True)
        for _ in range(plan.suite_repeats)
    ]
    contract_runs = [timed_command(contract_cmd, folder) for _ in range(plan.contract_repeats)]
    return {
        "measured": True,
        "finished": provenance.now(),
        "load_average_end": provenance.load_average(),
        "make_test": summarize(make_runs),
        "contract": summarize(contract_runs),
    }
