"""The figures of a full campaign run, written to $CAMPAIGN_RESULTS (never by default)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from filelock import FileLock

from bench import provenance as shared_provenance
from resume_lab.atomic import atomic_write_bytes

# The minimum counts for a full run; the committed results and the pages check them.
MINIMUMS = {"kills": 200, "flips": 1000, "sigterms": 10}

RESULTS_ENV = "CAMPAIGN_RESULTS"
# Resolved now, at collection: every test runs with its working directory in a temporary folder.
RESULTS = Path(os.environ[RESULTS_ENV]).resolve() if os.environ.get(RESULTS_ENV) else None
# One place computes provenance for the benchmarks, the build and the campaign.
STARTED = shared_provenance.start(None, "resume_lab")
# One test run: under pytest-xdist its workers share the run's id, so their parts add up.
RUN = os.environ.get("PYTEST_XDIST_TESTRUNUID") or STARTED["started"] + f"-{os.getpid()}"


def provenance() -> dict[str, Any]:
    return shared_provenance.finish(STARTED, run=RUN)


def record(section: str, **figures: Any) -> None:
    """Store one part's figures in $CAMPAIGN_RESULTS, if set; a no-op otherwise.

    The file only ever holds one run: figures from an earlier run (another process) are dropped
    when this run records its first part. `losses` and `trusted_wrongly` are summed in `totals`.
    """
    if RESULTS is None:
        return
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    # Workers of one xdist run update the file in turn, or one's part would overwrite another's.
    # The lock lives in the temporary folder: RESULTS may be a file the repository commits.
    with FileLock(Path(tempfile.gettempdir()) / f"campaign-results-{os.getuid()}.lock"):
        _merge(section, figures)


def _merge(section: str, figures: dict[str, Any]) -> None:
    assert RESULTS is not None
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
    text = json.dumps(dict(sorted(results.items())), indent=2, sort_keys=True) + "\n"
    atomic_write_bytes(RESULTS, text.encode("utf8"))
