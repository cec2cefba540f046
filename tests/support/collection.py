"""What pytest collects, for the tests that check the collection itself.

tests/docs/test_claims.py (every proof is collected, in the tier its status names) and
tests/docs/test_fences.py (every python fence of a page is collected) need the node ids pytest
collects from the pages and the test files, before `-m` deselects any. The session that runs
them has usually just collected exactly that: tests/conftest.py calls `record()` as the
session's items are collected, before `-m`, `-k` or `--deselect` removes any, which keeps every
node id with whether `make test` runs it. Only when the session collected less than a test
needs (it was given one file, or node ids) does `collected()` ask a pytest of its own, in a
subprocess.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

from page_fences.census import runnable_python
from page_fences.tiers import in_inner_loop

# The marker expression of `make test` (Makefile, INNER).
INNER = "not slow and not full and not heavy"


@dataclass(frozen=True)
class Collected:
    ids: frozenset[str]  # every node id collected, in any tier
    inner: frozenset[str]  # the ones `make test` runs

    def files(self) -> set[str]:
        return {node.partition("::")[0] for node in self.ids}


_session: dict[str, Collected | bool] = {}


def record(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep what this session collected (before any plugin deselects)."""
    _session["collected"] = Collected(
        frozenset(item.nodeid for item in items),
        frozenset(item.nodeid for item in items if in_inner_loop(item)),
    )
    # Node ids on the command line collect only those nodes: not a whole file's items.
    _session["narrowed"] = any("::" in str(arg) for arg in config.args)


def collected(root: Path, paths: Iterable[str]) -> Collected:
    """What pytest collects from `paths` (files or folders, relative to `root`): this session's
    collection when it holds every file of them, else a `pytest --collect-only` of its own."""
    paths = sorted(set(paths))
    wanted = {
        str(file.relative_to(root))
        for path in paths
        for file in ([root / path] if (root / path).is_file() else (root / path).rglob("*"))
        if file.suffix in (".py", ".md") and file.is_file()
    }
    session = _session.get("collected")
    if isinstance(session, Collected) and not _session.get("narrowed"):
        held = session.files()
        # Files with nothing to collect (a page without python fences) hold no item either
        # way; every file that has items here must be one the session collected.
        if wanted & held and not (wanted - held - files_without_items(root, wanted - held)):
            return restricted(session, wanted)
    return Collected(ask_pytest(root, paths, ""), ask_pytest(root, paths, INNER))


def restricted(session: Collected, files: set[str]) -> Collected:
    def keep(ids: frozenset[str]) -> frozenset[str]:
        return frozenset(node for node in ids if node.partition("::")[0] in files)

    return Collected(keep(session.ids), keep(session.inner))


def files_without_items(root: Path, files: set[str]) -> set[str]:
    """Of `files`, those pytest would collect nothing from: pages without a runnable python
    fence, and modules that are not test files."""
    return {name for name in files if not has_items(root / name)}


def has_items(path: Path) -> bool:
    if path.suffix == ".md":
        return bool(runnable_python(path.read_text("utf8")))
    return path.name.startswith("test_")


def ask_pytest(root: Path, paths: list[str], markers: str) -> frozenset[str]:
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "--color=no", "-m", markers]
    run = subprocess.run([*command, *paths], cwd=root, capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    return frozenset(line for line in run.stdout.splitlines() if "::" in line)
