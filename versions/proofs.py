"""What each ledger proof is, as text, so that a recorded run can say which proof it ran.

A run on another torch release (`python -m versions`) records, for every claim, a digest of
its proof as it stood when the run began; the build and tests/docs/test_versions.py compare it
with the proof now. A proof's text is

- for a fence `PAGE.md#ID`: the fence's lines as written, and the lines of every file or
  section it includes (pymdownx.snippets), in order;
- for a test `tests/FILE.py::NAME[PARAMS]`: the source of the function NAME.

So an edit to a proof (or to the file a fence includes) changes its digest; an edit to what a
test only calls (a fixture, a helper) does not.

Also here: naming a failing page line by the fence it is in (`PAGE.md#ID, line N of the
block`), since a page's line numbers move with every edit above them.
"""

from __future__ import annotations

import ast
import hashlib
import io
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FENCE_PROOF = re.compile(r"^(?P<page>[\w-]+\.md)#(?P<id>[\w-]+)$")
TEST_PROOF = re.compile(r"^(?P<file>tests/[\w/]+\.py)::(?P<name>\w+)(?:\[.*\])?$")
PAGE_LINE = re.compile(r"^docs/(?P<page>[\w-]+\.md):(?P<line>\d+)$")


def page_fences(root: Path = ROOT) -> list[tuple[str, str | None, int, list[str]]]:
    """(page, fence id or None, line of its opening fence, its text with includes) for every
    python fence of every page."""
    from page_fences.census import PYTHON_LANGS, fences
    from page_fences.includes import INCLUDE_LINE, resolve_include

    found = []
    for page in sorted((root / "docs").glob("*.md")):
        for fence in fences(page.read_text("utf8")):
            if fence.lang not in PYTHON_LANGS:
                continue
            name = next((o[1:] for o in fence.options if o.startswith("#")), None)
            text = list(fence.body)
            for line in fence.body:
                if included := INCLUDE_LINE.match(line):
                    text += resolve_include(included["target"], root)[2]
            found.append((page.name, name, fence.line, text))
    return found


def digest(lines: list[str]) -> str:
    return hashlib.sha256("\n".join(lines).encode("utf8")).hexdigest()[:16]


@cache
def _functions(path: Path, mtime: int) -> dict[str, str]:
    text = path.read_text("utf8")
    # ast.get_source_segment's lines (they split as here), split once per file: it splits the
    # whole file again for every function, which took most of a build's time.
    lines = io.StringIO(text, newline="").readlines()
    return {
        node.name: _segment(lines, node)
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.FunctionDef)
    }


def _segment(lines: list[str], node: ast.FunctionDef) -> str:
    """What ast.get_source_segment(text, node) returns, from the text's lines."""
    assert node.end_lineno is not None and node.end_col_offset is not None
    first, last = node.lineno - 1, node.end_lineno - 1
    if first == last:
        return lines[first].encode()[node.col_offset : node.end_col_offset].decode()
    head = lines[first].encode()[node.col_offset :].decode()
    tail = lines[last].encode()[: node.end_col_offset].decode()
    return "".join([head, *lines[first + 1 : last], tail])


def proof_digests(entries: list[dict], root: Path = ROOT) -> dict[str, str]:
    """Claim id -> the digest of its proof now (claims without a proof, or whose proof is
    not found, are left out)."""
    by_id = {(page, name): text for page, name, _, text in page_fences(root) if name}
    found = {}
    for entry in entries:
        proof = str(entry.get("proof", ""))
        if fence := FENCE_PROOF.match(proof):
            text = by_id.get((fence["page"], fence["id"]))
            if text is not None:
                found[entry["id"]] = digest(text)
        elif test := TEST_PROOF.match(proof):
            path = root / test["file"]
            if path.is_file():
                source = _functions(path, path.stat().st_mtime_ns).get(test["name"])
                if source is not None:
                    found[entry["id"]] = digest(source.splitlines())
    return found


def fence_where(where: str, fences: list[tuple[str, str | None, int]]) -> str:
    """'docs/PAGE.md:LINE' -> 'PAGE.md#ID, line N of the block' when LINE is inside a fence
    with an id (fences: (page, id or None, line of the opening fence)); else unchanged."""
    found = PAGE_LINE.match(where)
    if not found:
        return where
    line = int(found["line"])
    before = [(start, name) for page, name, start in fences if page == found["page"]]
    before = [(start, name) for start, name in before if start < line]
    if not before:
        return where
    start, name = max(before, key=lambda pair: pair[0])
    return f"{found['page']}#{name}, line {line - start} of the block" if name else where
