"""The pages' code blocks: all of them run, none is silently skipped or mis-rendered."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import collection
import pytest

from page_fences.census import (
    INCLUDE_LINE,
    bare_word_options,
    fences,
    pages,
    runnable_python,
)

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


# A page's item, as pytest-markdown-docs names it: docs/PAGE.md::[CodeFence#N][line:L]
FENCE_ITEM = re.compile(r"(?P<page>[^:]+)::\[CodeFence#\d+\]\[line:(?P<line>\d+)\]")


def collected_fences() -> Counter:
    """The (page, line of the opening fence) of every item pytest itself collects from the
    pages, in any tier (whatever the selection: `make test`'s leaves the blocks that start gloo
    ranks to `make test-all`), as this session collected them when it collected the pages
    (tests/support/collection.py)."""
    ids = collection.collected(ROOT, ["docs"]).ids
    found: Counter[tuple[str, int]] = Counter()
    for node in ids:
        if "::[CodeFence#" in node:
            item = FENCE_ITEM.fullmatch(node)
            assert item, node
            found[item["page"], int(item["line"])] += 1
    return found


def test_every_python_fence_is_collected():
    """Exactly the python fences not marked notest, each once: the same pages and lines."""
    expected = Counter(
        (str(page.relative_to(ROOT)), fence.line)
        for page in pages(DOCS)
        for fence in runnable_python(page.read_text("utf8"))
    )
    assert expected, "no python fences found at all"
    assert collected_fences() == expected


@pytest.mark.parametrize("page", pages(DOCS), ids=lambda p: str(p.relative_to(DOCS)))
def test_fence_options_are_in_brace_form(page: Path):
    problems = [
        f"{page.relative_to(ROOT)}:{fence.line}: write `{{.{fence.lang} {' '.join(words)}}}` "
        f"instead of bare words {words}"
        for fence in fences(page.read_text("utf8"))
        if (words := bare_word_options(fence))
    ]
    assert not problems, "\n".join(problems)


def included_targets() -> list[tuple[Path, str]]:
    return [
        (page, match["target"])
        for page in pages(DOCS)
        for match in INCLUDE_LINE.finditer(page.read_text("utf8"))
    ]


def test_every_include_target_resolves(include_resolver):
    for page, target in included_targets():
        _path, _first, lines = include_resolver(target)
        assert lines, f"{page.relative_to(ROOT)}: include {target!r} brings in nothing"


def test_every_snippet_is_shown_on_some_page():
    shown = {target.partition(":")[0] for _, target in included_targets()}
    snippets = {str(p.relative_to(ROOT)) for p in (ROOT / "snippets").rglob("*.py")}
    assert snippets, "snippets/ is empty"
    assert snippets <= shown, f"snippets no page includes: {sorted(snippets - shown)}"


def test_no_python_files_in_docs():
    # pytest --markdown-docs imports every .py under a collected path; docs/ is pages only.
    assert not list(DOCS.rglob("*.py"))
