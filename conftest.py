"""Make pytest-markdown-docs read the pages the way MkDocs renders them.

Three gaps between the two readers are closed here:

1. Python-Markdown renders fences nested in admonitions (``!!! note``) and content tabs
   (``=== "Tab"``); CommonMark sees an indented code block and pytest-markdown-docs would
   silently skip it. The parser below removes the container indentation first (line numbers
   are kept), so those fences run too.
2. A fence line ``--8<-- "snippets/x.py"`` (or ``"code/resume_lab/checkpoint.py:atomic_save"``)
   is replaced by pymdownx.snippets when the site is built. Here the runner executes the real
   file under its real name, so a failure points at ``snippets/x.py:LINE``.
3. Every fence and test starts seeded, inside a fresh temporary directory, and the global
   state torch keeps per process is put back afterwards.
"""

from __future__ import annotations

import random
import re
import textwrap
import traceback
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from markdown_it import MarkdownIt
from pytest_markdown_docs._runners import DefaultRunner, register_runner
from pytest_markdown_docs.definitions import FenceTestDefinition

# The built site, shared by tests/site and tests/browser (tests/support is on pytest's path).
pytest_plugins = ["site_fixture"]

ROOT = Path(__file__).resolve().parent
SEED = 0

# The same line pymdownx.snippets replaces; `;--8<--` is its escape and is left alone.
SNIPPET_LINE = re.compile(r'^\s*--8<--\s+"(?P<target>[^"]+)"\s*$')
# Openers of the containers whose bodies Python-Markdown reads indented by four spaces.
CONTAINER_START = re.compile(r"^(?P<indent> *)(?:!!!|\?\?\?\+?|===[!+]?)\s")


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
    def parse(self, src: str, env=None):
        return super().parse(flatten_containers(src), env)


@pytest.hookimpl
def pytest_markdown_docs_markdown_it() -> MarkdownIt:
    return MkDocsMarkdownIt("commonmark")


# --- 2. run included files as themselves ----------------------------------------------------


def section_lines(path: Path, section: str) -> tuple[int, list[str]]:
    """(first line number, lines) between `--8<-- [start:NAME]` and `--8<-- [end:NAME]`."""
    lines = path.read_text("utf8").splitlines()
    start = re.compile(rf"--8<--\s*\[start:{re.escape(section)}\]")
    end = re.compile(rf"--8<--\s*\[end:{re.escape(section)}\]")
    first = next((i for i, line in enumerate(lines) if start.search(line)), None)
    if first is None:
        raise LookupError(f"{path.relative_to(ROOT)}: no section marker [start:{section}]")
    last = next((i for i in range(first + 1, len(lines)) if end.search(lines[i])), None)
    if last is None:
        raise LookupError(f"{path.relative_to(ROOT)}: section [start:{section}] is never ended")
    # pymdownx.snippets dedents sections (dedent_subsections), so a method reads as a function.
    body = textwrap.dedent("\n".join(lines[first + 1 : last])).split("\n")
    return first + 2, body


def resolve_include(target: str) -> tuple[Path, int, list[str]]:
    """The file an include line names, with the first line number and lines it brings in."""
    name, _, section = target.partition(":")
    path = (ROOT / name).resolve()
    if not path.is_file():
        raise FileNotFoundError(f'--8<-- "{target}": no file {name} under {ROOT}')
    if section:
        first, lines = section_lines(path, section)
        return path, first, lines
    return path, 1, path.read_text("utf8").splitlines()


def fence_segments(test: FenceTestDefinition) -> Iterator[tuple[str, str]]:
    """Split a fence into (filename, source) parts, padded so line numbers stay true."""
    pending: list[tuple[int, str]] = []

    def flush() -> Iterator[tuple[str, str]]:
        if pending:
            first = pending[0][0]
            yield str(test.source_path), "\n" * first + "\n".join(t for _, t in pending)
            pending.clear()

    for number, text in enumerate(test.source.split("\n")):
        match = SNIPPET_LINE.match(text)
        if not match:
            pending.append((number, text))
            continue
        yield from flush()
        path, first, lines = resolve_include(match["target"])
        yield str(path), "\n" * (first - 1) + "\n".join(lines)
    yield from flush()


@register_runner(default=True)
class IncludeAwareRunner(DefaultRunner):
    """Runs a fence, executing each included file under its own name and line numbers."""

    def runtest(self, test: FenceTestDefinition, args, *, asyncio_runner=None):
        for filename, source in fence_segments(test):
            exec(compile(source, filename, "exec", dont_inherit=True), args)

    def repr_failure(self, test: FenceTestDefinition, excinfo, style=None) -> str:
        frames = traceback.extract_tb(excinfo.tb)
        ours = {str(test.source_path)} | {str(p) for p in (ROOT / "snippets").rglob("*.py")}
        ours |= {str(p) for p in (ROOT / "code").rglob("*.py")}
        start = next((i for i, f in enumerate(frames) if f.filename in ours), 0)
        shown = []
        for frame in frames[start:]:
            where = Path(frame.filename)
            if where.is_relative_to(ROOT):
                where = where.relative_to(ROOT)
            shown.append(
                f"  {where}:{frame.lineno} in {frame.name}\n    {(frame.line or '').strip()}"
            )
        return "Traceback (most recent call last):\n" + "\n".join(shown) + f"\n{excinfo.exconly()}"


@pytest.fixture
def include_resolver():
    """The runner's own resolver, for tests of the pages (importing conftest is unreliable)."""
    return resolve_include


# --- 3. seeded, isolated, and leaving no trace ----------------------------------------------


@pytest.fixture(autouse=True)
def _seeded_isolated_restored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Each fence and test: seeded RNGs, cwd in a temporary folder, global state restored."""
    threads = torch.get_num_threads()
    dtype = torch.get_default_dtype()
    deterministic = torch.are_deterministic_algorithms_enabled()
    deterministic_warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    grad_enabled = torch.is_grad_enabled()
    safe_globals = list(torch.serialization.get_safe_globals())
    torch_rng = torch.get_rng_state()
    python_rng = random.getstate()
    numpy_rng = np.random.get_state()

    monkeypatch.chdir(tmp_path)
    torch.manual_seed(SEED)
    random.seed(SEED)
    np.random.seed(SEED)
    yield
    torch.set_num_threads(threads)
    torch.set_default_dtype(dtype)
    # Only when a test changed it: the first call in a process imports ~800 modules (0.8 s).
    if (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
    ) != (deterministic, deterministic_warn_only):
        torch.use_deterministic_algorithms(deterministic, warn_only=deterministic_warn_only)
    torch.set_grad_enabled(grad_enabled)
    torch.serialization.clear_safe_globals()
    torch.serialization.add_safe_globals(safe_globals)
    torch.set_rng_state(torch_rng)
    random.setstate(python_rng)
    np.random.set_state(numpy_rng)
