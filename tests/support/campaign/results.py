"""The figures of a full campaign run, written to $CAMPAIGN_RESULTS (never by default)."""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

import resume_lab
from resume_lab.atomic import atomic_write_bytes

# The minimum counts for a full run; the committed results and the pages check them.
MINIMUMS = {"kills": 200, "flips": 1000, "sigterms": 10}

RESULTS_ENV = "CAMPAIGN_RESULTS"
# Resolved now, at collection: every test runs with its working directory in a temporary folder.
RESULTS = Path(os.environ[RESULTS_ENV]).resolve() if os.environ.get(RESULTS_ENV) else None
STARTED = time.monotonic()
RUN = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ") + f"-{os.getpid()}"


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def provenance() -> dict[str, Any]:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    versions = {
        "torch": str(torch.__version__),
        "numpy": np.__version__,
        "python": platform.python_version(),
        "resume_lab": resume_lab.__version__,
    }
    machine = f"{cpu_model()}, {cores} cores, {platform.system()} {platform.release()}"
    return {
        "run": RUN,
        "date": RUN[:10],
        "versions": versions,
        "machine": machine,
        "summary": f"torch {versions['torch']}, NumPy {versions['numpy']}, "
        f"Python {versions['python']} on {machine}",
        "seconds": round(time.monotonic() - STARTED, 1),
    }


def record(section: str, **figures: Any) -> None:
    """Store one part's figures in $CAMPAIGN_RESULTS, if set; a no-op otherwise.

    The file only ever holds one run: figures from an earlier run (another process) are dropped
    when this run records its first part. `losses` and `trusted_wrongly` are summed in `totals`.
    """
    if RESULTS is None:
        return
    results = json.loads(RESULTS.read_text("utf8")) if RESULTS.exists() else {}
    if results.get("provenance", {}).get("run") != RUN:
        results = {}
    results[section] = figures
    results["provenance"] = provenance()
    parts = [v for k, v in results.items() if k not in ("provenance", "totals")]
    results["totals"] = {
        "losses": sum(part.get("losses", 0) for part in parts),
        "trusted_wrongly": sum(part.get("trusted_wrongly", 0) for part in parts),
        "parts": len(parts),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(dict(sorted(results.items())), indent=2, sort_keys=True) + "\n"
    atomic_write_bytes(RESULTS, text.encode("utf8"))
