"""The one reader of pymdownx.snippets include lines, for the test runner and the build.

A fence line `--8<-- "snippets/x.py"` (or `"code/resume_lab/checkpoint.py:atomic_save"`, a
section between `# --8<-- [start:NAME]` and `# --8<-- [end:NAME]`) is replaced by the file
when the site is built. Whoever runs a fence runs the real file instead, under its real name
and line numbers, so a failure points at `snippets/x.py:LINE` (page_fences/run.py).
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# The line pymdownx.snippets replaces; `;--8<--` is its escape and is left alone.
INCLUDE_LINE = re.compile(r'^\s*--8<--\s+"(?P<target>[^"]+)"\s*$', re.M)


@dataclass(frozen=True)
class Part:
    """A piece of a fence to compile on its own: the fence's lines, a whole file, a section."""

    filename: str  # the page, or the included file (absolute)
    source: str  # padded with newlines, so that its lines keep their numbers in `filename`
    section: str | None = None  # the section's name when the part is `file.py:NAME`


def section_lines(path: Path, section: str, root: Path) -> tuple[int, list[str]]:
    """(first line number, lines) between `--8<-- [start:NAME]` and `--8<-- [end:NAME]`."""
    lines = path.read_text("utf8").splitlines()
    start = re.compile(rf"--8<--\s*\[start:{re.escape(section)}\]")
    end = re.compile(rf"--8<--\s*\[end:{re.escape(section)}\]")
    first = next((i for i, line in enumerate(lines) if start.search(line)), None)
    if first is None:
        raise LookupError(f"{path.relative_to(root)}: no section marker [start:{section}]")
    last = next((i for i in range(first + 1, len(lines)) if end.search(lines[i])), None)
    if last is None:
        raise LookupError(f"{path.relative_to(root)}: section [start:{section}] is never ended")
    # pymdownx.snippets dedents sections (dedent_subsections), so a method reads as a function.
    body = textwrap.dedent("\n".join(lines[first + 1 : last])).split("\n")
    return first + 2, body


def resolve_include(target: str, root: Path) -> tuple[Path, int, list[str]]:
    """The file an include line names, with the first line number and lines it brings in."""
    name, _, section = target.partition(":")
    path = (root / name).resolve()
    if not path.is_file():
        raise FileNotFoundError(f'--8<-- "{target}": no file {name} under {root}')
    if section:
        first, lines = section_lines(path, section, root)
        return path, first, lines
    return path, 1, path.read_text("utf8").splitlines()


def segments(source: str, filename: str, root: Path) -> Iterator[Part]:
    """Split a fence's code into the parts to compile one after the other.

    `source` is the fence body padded with newlines so that its lines keep their page line
    numbers; every part keeps the line numbers of the file it comes from.
    """
    pending: list[tuple[int, str]] = []

    def flush() -> Iterator[Part]:
        if pending:
            first = pending[0][0]
            yield Part(filename, "\n" * first + "\n".join(text for _, text in pending))
            pending.clear()

    for number, text in enumerate(source.split("\n")):
        match = INCLUDE_LINE.match(text)
        if not match:
            pending.append((number, text))
            continue
        yield from flush()
        path, first, lines = resolve_include(match["target"], root)
        section = match["target"].partition(":")[2] or None
        yield Part(str(path), "\n" * (first - 1) + "\n".join(lines), section)
    yield from flush()
