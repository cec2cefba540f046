"""Run a fence's code the way its page shows it: the one way, for the tests and for the build.

A fence is cut into parts (page_fences/includes.py): its own lines, a file it includes whole,
a section of a file (`--8<-- "code/resume_lab/checkpoint.py:verify"`). Each part is compiled
under the name of the file it comes from, on that file's line numbers, so a failure points at
`code/resume_lab/checkpoint.py:LINE`.

- The fence's own lines, and a file included whole, run in the fence's namespace.
- A section runs in its module's namespace: a copy of the globals that importing the file
  gives (its imports, its constants, the other functions it calls), compiled with the
  module's `from __future__` features. The page shows the section alone, as the file has it,
  and it runs as it does in the file; what the section defines or rebinds is then the
  fence's to use. The module itself is left as it was (the section runs in a copy).
"""

from __future__ import annotations
import __future__

import contextlib
import importlib
import importlib.util
import io
import runpy
import tempfile
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

from page_fences.includes import Part


def run_parts(parts: Iterable[Part], namespace: dict[str, Any]) -> None:
    """Run every part in turn; `namespace` is the fence's and holds what it defines."""
    for part in parts:
        if part.section is None:
            exec(compile(part.source, part.filename, "exec", dont_inherit=True), namespace)
        else:
            namespace.update(run_section(part))


def figures(parts: Iterable[Part]) -> dict[str, Any]:
    """The namespace a fence leaves, run as the tests run it (seeded, in a scratch folder,
    global state put back), its printing discarded: where the build reads a figure."""
    from page_fences.isolation import isolated  # imports torch: only when something runs

    namespace: dict[str, Any] = {"__name__": "__main__"}
    with (
        tempfile.TemporaryDirectory() as scratch,
        isolated(scratch),
        contextlib.redirect_stdout(io.StringIO()),
    ):
        run_parts(parts, namespace)
    return namespace


def printed(path: Path) -> str:
    """What a file prints when run as a script, as the tests would run it."""
    from page_fences.isolation import isolated

    out = io.StringIO()
    with (
        tempfile.TemporaryDirectory() as scratch,
        isolated(scratch),
        contextlib.redirect_stdout(out),
    ):
        runpy.run_path(str(path), run_name="__main__")
    return out.getvalue().rstrip("\n")


def run_section(part: Part) -> dict[str, Any]:
    """Run a section in a copy of its module's globals; return what it bound there."""
    module = importlib.import_module(module_name(part.filename))
    scope = dict(vars(module))
    before = dict(scope)
    flags = future_flags(scope)
    exec(compile(part.source, part.filename, "exec", flags=flags, dont_inherit=True), scope)
    return {
        name: value
        for name, value in scope.items()
        if name not in before or before[name] is not value
    }


def future_flags(scope: dict[str, Any]) -> int:
    """The compiler flags of the `from __future__` imports a module's globals record."""
    flags = 0
    for name in __future__.all_feature_names:
        feature: __future__._Feature = getattr(__future__, name)
        if scope.get(name) is feature:
            flags |= feature.compiler_flag
    return flags


@cache
def module_name(filename: str) -> str:
    """The name a file is imported by: the shortest dotted tail of its path whose spec's
    origin is the file itself (`code/resume_lab/rng.py` is `resume_lab.rng`)."""
    path = Path(filename).resolve()
    parts = path.with_suffix("").parts
    for size in range(1, len(parts)):
        candidate = parts[-size:]
        if not all(piece.isidentifier() for piece in candidate):
            break
        name = ".".join(candidate)
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):  # a parent that is no package
            continue
        if spec is not None and spec.origin and Path(spec.origin).resolve() == path:
            return name
    raise ImportError(
        f"{filename}: a section runs in its module's namespace, and no importable module "
        "is this file; include the whole file instead, or make it importable"
    )
