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
from fence_census import fences, pages

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
WIDTH = 80
INCLUDE = re.compile(r'^\s*--8<--\s+"(?P<target>[^"]+)"\s*$')
MARKER = re.compile(r"--8<--\s*\[(start|end):")  # section markers: pymdownx.snippets hides them
PLACEHOLDER = "{{"


def fence_bodies(text: str) -> list[tuple[int, str, list[str]]]:
    """(first body line number, indent, body lines) of each fence on a page."""
    lines = text.splitlines()
    bodies = []
    for fence in fences(text):
        end = fence.line
        while end < len(lines) and not lines[end].strip().startswith(("```", "~~~")):
            end += 1
        bodies.append((fence.line + 1, fence.indent, lines[fence.line : end]))
    return bodies


def too_wide(page: Path, resolve) -> list[str]:
    found = []
    for first, indent, body in fence_bodies(page.read_text("utf8")):
        for number, line in enumerate(body, start=first):
            include = INCLUDE.match(line)
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
