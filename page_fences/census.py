"""Count the fences on a page the way a reader sees them, independently of any test plugin."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

# A fence line that pymdownx.snippets replaces with a file or a section of one (one pattern,
# declared where includes are resolved; the tests import it from here too).
from page_fences.includes import INCLUDE_LINE as INCLUDE_LINE

FENCE_OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<mark>`{3,}|~{3,})(?P<info>[^`]*)$")
PYTHON_LANGS = {"py", "python", "python3"}
KEY_VALUE = re.compile(r'^[\w-]+=("[^"]*"|\S+)$')


@dataclass(frozen=True)
class Fence:
    line: int  # 1-based line of the opening fence
    indent: str
    lang: str | None
    options: tuple[str, ...]
    brace_form: bool
    body: tuple[str, ...] = ()  # the lines between the opening and closing fence, as written


def parse_info(info: str) -> tuple[str | None, tuple[str, ...], bool]:
    info = info.strip()
    if info.startswith("{"):
        words = info.strip("{}").split()
        lang = next((w[1:] for w in words if w.startswith(".")), None)
        rest = tuple(w for w in words if w != f".{lang}")
        return lang, rest, True
    words = info.split()
    return (words[0] if words else None), tuple(words[1:]), False


def fences(text: str) -> list[Fence]:
    """Every top-level fence, at any indentation; fences shown inside other fences are skipped."""
    found: list[Fence] = []
    lines = text.splitlines()
    closing: re.Pattern | None = None
    for number, line in enumerate(lines, start=1):
        if closing is not None:
            if closing.match(line):
                closing = None
                opening = found[-1]
                body = tuple(lines[opening.line : number - 1])
                found[-1] = replace(opening, body=body)
            continue
        opened = FENCE_OPEN.match(line)
        if not opened:
            continue
        mark = opened["mark"]
        lang, options, brace = parse_info(opened["info"])
        found.append(Fence(number, opened["indent"], lang, options, brace))
        closing = re.compile(rf"^[ \t]*{re.escape(mark[0])}{{{len(mark)},}}\s*$")
    if closing is not None:  # a fence left open runs to the end of the page
        found[-1] = replace(found[-1], body=tuple(lines[found[-1].line :]))
    return found


def runnable_python(text: str) -> list[Fence]:
    return [f for f in fences(text) if f.lang in PYTHON_LANGS and "notest" not in f.options]


def bare_word_options(fence: Fence) -> list[str]:
    """Options written outside the brace form: they silently break Python-Markdown's rendering."""
    if fence.brace_form:
        return []
    return [word for word in fence.options if not KEY_VALUE.match(word)]


def pages(docs: Path) -> list[Path]:
    return sorted(docs.rglob("*.md"))
