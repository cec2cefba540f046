"""The view of performance.json: what the performance page says, from the stored numbers.

`view(results)` is the stored results with the derived figures added (ratios, rates, spreads and
comparisons), the targets judged, and the page's tables and sentences (`headline`). Every
sentence that compares two measurements is built by timing.outcome from timing.compare: it names
a winner only when the runs separate; a target is judged by timing.judge, only when its floor is
steadier than its margin. The hash sentence says the numbers support the default only when they
do. Nothing here is stored: rewording a sentence or changing a rule needs no new measurement.

One results file, one view, in parts that import only the basics and each other (no circle):
rules.py (the targets and units), derive.py (figures and verdicts), words.py (sentences),
tables.py (tables); this module puts them together.
"""

from __future__ import annotations

import copy
from typing import Any

from ... import provenance
from .derive import derive, method, targets
from .rules import fmt_bytes
from .tables import (
    hash_table_md,
    load_table_md,
    sampler_table_md,
    save_table_md,
    table_md,
)
from .words import hash_choice, headline

__all__ = ["fmt_bytes", "view"]


def view(results: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(results)
    derive(out)
    out["provenance"] = provenance.worded(results["provenance"], method(results["plan"]))
    out["targets"] = targets(out)
    out["hash_choice"] = hash_choice(out["save"], out["hashing"])
    out["headline"] = headline(out)
    out["table_md"] = table_md(out)
    out["sampler_table_md"] = sampler_table_md(out["sampler"])
    out["save_table_md"] = save_table_md(out["save"])
    out["hash_table_md"] = hash_table_md(out["save"], out["hashing"])
    out["load_table_md"] = load_table_md(out["verify_load"])
    return out
