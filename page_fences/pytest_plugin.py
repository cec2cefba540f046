"""The fence runner: a pytest plugin that makes pytest-markdown-docs read the pages the way
MkDocs renders them. The root conftest.py registers it (`pytest_plugins`).

Three gaps between the two readers are closed here:

1. Python-Markdown renders fences nested in admonitions (``!!! note``) and content tabs
   (``=== "Tab"``); CommonMark sees an indented code block and pytest-markdown-docs would
   silently skip it. The parser below removes the container indentation first (line numbers
   are kept), so those fences run too.
2. A fence line ``--8<-- "snippets/x.py"`` (or ``"code/resume_lab/checkpoint.py:atomic_save"``)
   is replaced by pymdownx.snippets when the site is built. Here the runner executes the real
   file under its real name, so a failure points at ``snippets/x.py:LINE``; a section runs in
   its module's namespace, so the page need not copy the module's imports above it
   (page_fences/includes.py, page_fences/run.py; the build runs fences the same way).
3. Every fence and test starts seeded, inside a fresh temporary directory, and the global
   state torch keeps per process is put back afterwards (page_fences/isolation.py).

Include paths are resolved from pytest's rootdir. The plugin's private runner API is reached
only through page_fences/markdown_docs_adapter.py.
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt

from page_fences.includes import resolve_include, segments
from page_fences.isolation import isolated
from page_fences.markdown_docs_adapter import (
    DefaultRunner,
    FenceTestDefinition,
    register_default_runner,
)
from page_fences.run import run_parts

# Openers of the containers whose bodies Python-Markdown reads indented by four spaces.
CONTAINER_START = re.compile(r"^(?P<indent> *)(?:!!!|\?\?\?\+?|===[!+]?)\s")

# The folder include lines are relative to: pytest's rootdir, set when pytest starts.
_root = Path.cwd()


def pytest_configure(config: pytest.Config) -> None:
    global _root
    _root = config.rootpath


# --- 1. read nested fences ------------------------------------------------------------------


def flatten_containers(text: str) -> str:
    """Remove the indentation that admonitions and content tabs add, keeping every line."""
    lines = text.splitlines(keepends=True)
    body_indents: list[int] = []
    out = []
    for line in lines:
        if line.strip():
            width = len(line) - len(line.lstrip(" "))
            while body_indents and width < body_indents[-1]:
                body_indents.pop()
        dedent = body_indents[-1] if body_indents else 0
        if not line.strip():
            # A blank line may be shorter than the indent; slicing it would drop its newline.
            out.append(line.lstrip(" \t"))
        elif line[:dedent].strip() == "":
            out.append(line[dedent:])
        else:
            out.append(line)
        opener = CONTAINER_START.match(line)
        if opener:
            body_indents.append(len(opener["indent"]) + 4)
    return "".join(out)


class MkDocsMarkdownIt(MarkdownIt):
    def parse(self, src: str, env: Any = None) -> Any:
        return super().parse(flatten_containers(src), env)


@pytest.hookimpl
def pytest_markdown_docs_markdown_it() -> MarkdownIt:
    return MkDocsMarkdownIt("commonmark")


# --- 2. run included files as themselves ----------------------------------------------------


@register_default_runner
class IncludeAwareRunner(DefaultRunner):
    """Runs a fence as page_fences/run.py does: each included file under its own name and
    line numbers, each section in its module's namespace."""

    def runtest(
        self, test: FenceTestDefinition, args: dict[str, Any], *, asyncio_runner: Any = None
    ) -> None:
        run_parts(segments(test.source, str(test.source_path), _root), args)

    def repr_failure(
        self,
        test: FenceTestDefinition,
        excinfo: pytest.ExceptionInfo[BaseException],
        style: Any = None,
    ) -> str:
        frames = traceback.extract_tb(excinfo.tb)
        # From the first frame of the page or of a file it can include: the runner's own
        # frames (and pytest's) say nothing about the page.
        ours = {str(test.source_path)}
        for folder in ("snippets", "code", "bench"):
            ours |= {str(p) for p in (_root / folder).rglob("*.py")}
        start = next((i for i, f in enumerate(frames) if f.filename in ours), 0)
        shown = []
        for frame in frames[start:]:
            where = Path(frame.filename)
            if where.is_relative_to(_root):
                where = where.relative_to(_root)
            shown.append(
                f"  {where}:{frame.lineno} in {frame.name}\n    {(frame.line or '').strip()}"
            )
        return "Traceback (most recent call last):\n" + "\n".join(shown) + f"\n{excinfo.exconly()}"


@pytest.fixture
def include_resolver() -> Callable[[str], tuple[Path, int, list[str]]]:
    """The runner's own resolver, for tests of the pages."""
    return lambda target: resolve_include(target, _root)


# --- 3. seeded, isolated, and leaving no trace ----------------------------------------------


@pytest.fixture(autouse=True)
def _seeded_isolated_restored(tmp_path: Path) -> Iterator[None]:
    """Each fence and test: seeded RNGs, cwd in a temporary folder, global state restored."""
    with isolated(tmp_path):
        yield
