"""The one results writer: docs/assets/bench/NAME.json, what was measured, with what and where.

Every results file the benchmarks write has one shape, numbers and names only:

    {"plan": the part of the plan it was measured with (plan.recorded),
     KEY: what measurement KEY's measure(plan) returned, ... (bench/__main__.py says which),
     "provenance": machine, versions, date, duration and load (provenance.finish)}

Its view (bench/views/) words it when a page is built; nothing worded is stored.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from . import provenance
from .plan import Plan, recorded

# Where `make bench` writes its results; the site reads them from here.
RESULTS_DIR = Path(__file__).resolve().parent.parent / "docs" / "assets" / "bench"


def assemble(
    name: str, plan: Plan, measured: dict[str, Any], started: dict[str, Any]
) -> dict[str, Any]:
    """Results file `name`: its plan, its measurements, and the finished provenance record."""
    record = provenance.finish(started, mode=plan.mode)
    return {"plan": recorded(plan, name), **measured, "provenance": record}


def write(folder: Path, name: str, results: dict[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    path.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", "utf8")
    return path


def read(folder: Path, name: str) -> dict[str, Any]:
    return json.loads((folder / f"{name}.json").read_text("utf8"))
