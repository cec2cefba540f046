"""The measured results that pages quote through `{{ bench.FILE.KEY.SUBKEY }}` placeholders."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any


def quoted_paths(page: Path, results_file: str) -> list[str]:
    """The dotted paths a page quotes from docs/assets/bench/<results_file>.json."""
    placeholder = rf"\{{\{{\s*bench\.{re.escape(results_file)}\.([a-z0-9_.]+)\s*\}}\}}"
    return re.findall(placeholder, page.read_text("utf8"))


def unresolved(page: Path, results_file: str, results: dict[str, Any]) -> list[str]:
    """Quoted paths that the page's view of the results (what the build reads: the stored
    numbers and what bench/views.py derives from them) does not hold as a plain value."""
    from bench.views import view

    results = view(results_file, results)
    missing = []
    for path in quoted_paths(page, results_file):
        value: Any = results
        for key in path.split("."):
            value = value.get(key) if isinstance(value, dict) else None
        if not isinstance(value, str | int | float):
            missing.append(f"{page.name}: {path}")
    return missing
