"""Every line of code the site shows fits its code block: no reader scrolls sideways.

Material's content column shows about 80 monospace characters at any window width (the font
grows with the window), so page fences and the files and sections they include keep to that.
Lines filled in at build time (`{{ output.NAME }}`, `{{ lab.summary }}`) are program output and
are not counted.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from page_fences.census import INCLUDE_LINE, fences, pages

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
WIDTH = 80
MARKER = re.compile(r"--8<--\s*\[(start|end):")  # section markers: pymdownx.snippets hides them
PLACEHOLDER = "{{"


def too_wide(page: Path, resolve) -> list[str]:
    found = []
    for fence in fences(page.read_text("utf8")):
        indent = fence.indent
        for number, line in enumerate(fence.body, start=fence.line + 1):
            include = INCLUDE_LINE.match(line)
            if include:
                path, start, shown = resolve(include["target"])
                name = path.relative_to(ROOT)
                found += [
                    f"{name}:{n} ({len(text)} characters), shown on {page.name}"
                    for n, text in enumerate(shown, start=start)
                    if len(text) > WIDTH and not MARKER.search(text)
                ]
            elif len(line) - len(indent) > WIDTH and PLACEHOLDER not in line:
                found.append(f"{page.name}:{number} ({len(line) - len(indent)} characters)")
    return found


@pytest.mark.parametrize("page", pages(DOCS), ids=lambda p: p.name)
def test_every_shown_line_fits_the_code_block(page: Path, include_resolver):
    wide = too_wide(page, include_resolver)
    assert not wide, f"lines wider than {WIDTH} characters:\n" + "\n".join(wide)
