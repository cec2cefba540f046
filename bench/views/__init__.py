"""One view per results file: the only code that turns docs/assets/bench/FILE.json into what the
pages say.

`view(name, results)` is the view module of results file `name` applied to it: the stored
results with what follows from them (derived figures, comparisons, targets and verdicts) and the
page's tables and sentences added. The build calls it for every `{{ bench.FILE.* }}`
(hooks/build_facts.py), and `python -m bench` prints from it; nothing a view computes is ever
stored, so rewording a sentence or changing a rule needs no new measurement.

Each view module has `view(results) -> dict` and imports nothing from bench/ but the basics
(plan, timing, provenance): a page's number passes through its measurement module, its results
file's view, and the page, and no file between (tests/bench/test_three_files.py).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

# results file -> its view module (bench/views/MODULE.py)
VIEWS = {
    "performance": "performance",
    "serialization": "serialization",
    "distributed": "distributed",
    # the fault campaigns' counts, recorded by their tests (tests/reliability, tests/recipe,
    # tests/distributed) and quoted as stored
    "campaign": "stored",
    "distributed-faults": "stored",
    "recipe-campaign": "stored",
    "recipe-torchrun-campaign": "stored",
    "scaling": "stored",
}
STORED = "stored"  # any other results file is read as stored too


def module(name: str) -> ModuleType:
    """The view module of results file `name`."""
    return importlib.import_module(f"{__name__}.{VIEWS.get(name, STORED)}")


def view(name: str, results: dict[str, Any]) -> dict[str, Any]:
    """The page's view of results file `name`."""
    return module(name).view(results)
