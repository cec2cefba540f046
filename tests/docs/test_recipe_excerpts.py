"""A page that quotes snippets/recipe.py quotes it as it is.

snippets/recipe.py has no room for section markers (it keeps to 350 lines), so a page that shows
part of it copies the lines. A fence counts as such a copy when the paragraph right before it
links to the file, `[...](repo:snippets/recipe.py)`. Its lines must then be the recipe's:

- a line `...` (at any indentation) stands for lines left out;
- an import at column 0 need only be one of the recipe's imports;
- every other run of lines, between blank lines and `...`, is a run of consecutive lines of
  recipe.py, exactly as written there, and the runs come in the file's order.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from page_fences.census import INCLUDE_LINE, fences, pages

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "snippets" / "recipe.py"
LINK = "(repo:snippets/recipe.py)"


def paragraph_before(lines: list[str], fence_line: int) -> str:
    """The paragraph that ends right before the fence opened on `fence_line` (1-based)."""
    i = fence_line - 2
    while i >= 0 and not lines[i].strip():
        i -= 1
    paragraph = []
    while i >= 0 and lines[i].strip():
        paragraph.append(lines[i])
        i -= 1
    return "\n".join(reversed(paragraph))


def excerpts(docs: Path = ROOT / "docs") -> list[tuple[str, list[str]]]:
    """(page:line, the fence's lines out of their container) for every fence quoting recipe.py."""
    found = []
    for page in pages(docs):
        lines = page.read_text("utf8").splitlines()
        for fence in fences("\n".join(lines)):
            if LINK not in paragraph_before(lines, fence.line):
                continue
            if any(INCLUDE_LINE.match(line) for line in fence.body):
                continue  # an include is the file itself
            cut = len(fence.indent)
            found.append((f"{page.name}:{fence.line}", [line[cut:] for line in fence.body]))
    return found


def runs(shown: list[str]) -> tuple[list[str], list[list[str]]]:
    """The imports, and the runs of other lines, split at blank lines and `...`."""
    imports, found, run = [], [], []
    for line in shown:
        if line.startswith(("import ", "from ")):
            imports.append(line)
            continue
        if not line.strip() or line.strip() == "...":
            if run:
                found.append(run)
            run = []
            continue
        run.append(line)
    if run:
        found.append(run)
    return imports, found


def problems(shown: list[str], source: list[str]) -> list[str]:
    imports, found = runs(shown)
    wrong = [f"import not in recipe.py: {line!r}" for line in imports if line not in source]
    at = 0
    for run in found:
        starts = [
            i for i in range(at, len(source) - len(run) + 1) if source[i : i + len(run)] == run
        ]
        if not starts:
            wrong.append(f"not in recipe.py as shown (or out of order): {run[0]!r} ...")
            continue
        at = starts[0] + len(run)
    return wrong


def test_pages_quote_the_recipe():
    found = excerpts()
    assert found, "no page quotes snippets/recipe.py"


@pytest.mark.parametrize("where, shown", excerpts(), ids=[w for w, _ in excerpts()])
def test_a_quoted_excerpt_is_the_recipe_as_written(where: str, shown: list[str]):
    source = RECIPE.read_text("utf8").splitlines()
    assert not problems(shown, source), "\n".join([where, *problems(shown, source)])


def test_a_changed_line_is_caught():
    source = ["import torch", "", "def f(x):", "    y = x + 1", "    return y"]
    assert not problems(["import torch", "def f(x):", "    ...", "    return y"], source)
    assert not problems(["def f(x):", "    y = x + 1", "    return y"], source)
    assert problems(["def f(x):", "    y = x + 2"], source)  # changed
    assert problems(["def f(x):", "    return y"], source)  # a line left out without `...`
    assert problems(["    return y", "", "def f(x):"], source)  # out of order
    assert problems(["import numpy"], source)
