"""A page's benchmark number passes through three files: its measurement module, its results
file's view, and the page (bench/__init__.py says how).

Checked for every `{{ bench.FILE.KEY }}` on the pages: FILE has exactly one view module, the
placeholder resolves through it, and that module imports nothing from bench/ but the basics
(plan, timing, provenance), which import nothing from bench/ themselves. A chain (a view that
imports a wording module, a view of a view) fails here; so does a measurement module that words.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from bench import __main__ as runner
from bench import views

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
RESULTS = ROOT / "docs" / "assets" / "bench"
BASICS = {"bench.plan", "bench.timing", "bench.provenance"}
PLACEHOLDER = re.compile(r"\{\{\s*bench\.(?P<file>[a-z0-9_-]+)\.(?P<path>[a-z0-9_.]+)\s*\}\}")


def is_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def bench_imports(source: str, package: str) -> set[str]:
    """The bench modules a module of `package` imports, absolute or relative; an import done by
    name at run time (importlib) counts as a chain of unknown length."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            for alias in node.names:
                inner = f"{base}.{alias.name}"
                found.add(inner if is_module(inner) else base)
        elif isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in ("import_module", "__import__"):
                found.add("<import at run time>")
    return {n for n in found if n == "bench" or n.startswith(("bench.", "<"))}


def imports_of(module: str) -> set[str]:
    path = ROOT.joinpath(*module.split("."))
    if path.with_suffix(".py").is_file():
        return bench_imports(path.with_suffix(".py").read_text("utf8"), module.rsplit(".", 1)[0])
    return bench_imports((path / "__init__.py").read_text("utf8"), module)


def placeholders() -> list[tuple[str, str, str]]:
    """(page, FILE, KEY.SUBKEY) for every `{{ bench.FILE.KEY.SUBKEY }}` on the pages."""
    return [
        (page.name, m["file"], m["path"])
        for page in sorted((ROOT / "docs").rglob("*.md"))
        for m in PLACEHOLDER.finditer(page.read_text("utf8"))
    ]


def test_the_pages_quote_benchmark_results():
    files = {file for _, file, _ in placeholders()}
    assert {"performance", "serialization", "distributed", "campaign"} <= files


@pytest.mark.parametrize("file", sorted({file for _, file, _ in placeholders()}))
def test_each_quoted_results_file_has_one_view_that_imports_only_the_basics(file: str):
    assert file in views.VIEWS, f"{file}.json: no view named in bench/views/__init__.py"
    module = f"bench.views.{views.VIEWS[file]}"
    assert views.module(file).__name__ == module and is_module(module)
    assert imports_of(module) <= BASICS, f"{module} imports {imports_of(module) - BASICS}"


def test_the_basics_import_nothing_from_bench():
    for basic in BASICS:
        assert not imports_of(basic), basic


def test_every_placeholder_resolves_through_its_view():
    shown: dict[str, dict] = {}
    unresolved = []
    for page, file, path in placeholders():
        if file not in shown:
            stored = json.loads((RESULTS / f"{file}.json").read_text("utf8"))
            shown[file] = views.view(file, stored)
        value = shown[file]
        for key in path.split("."):
            value = value.get(key) if isinstance(value, dict) else None
        if not isinstance(value, str | int | float):
            unresolved.append(f"{page}: bench.{file}.{path}")
    assert not unresolved


def test_every_results_file_the_benchmarks_write_has_a_view_of_its_own():
    for name in runner.MEASUREMENTS:
        assert views.VIEWS.get(name) == name, name


def test_measurement_modules_measure_and_do_not_word():
    """Each imports the basics, the launcher and other measurements' fixtures, never a view,
    the writer or another measurement's `measure`."""
    allowed = BASICS | {"bench.launch"}
    for name, measurements in runner.MEASUREMENTS.items():
        for key, module in measurements:
            assert module.__name__.startswith("bench.measurements."), (name, key)
            assert callable(module.measure), module.__name__
            for imported in imports_of(module.__name__):
                fixture = imported.startswith("bench.measurements.")
                assert imported in allowed or fixture, (module.__name__, imported)
            source = Path(module.__file__).read_text("utf8")
            assert not re.search(r"from \.\w+ import .*\bmeasure\b", source), module.__name__


def test_the_import_check_finds_a_chain():
    """The check above fails on what the three-file rule forbids."""
    view = "bench.views"  # the package of a view module
    assert bench_imports("from .. import plan, timing", view) == {"bench.plan", "bench.timing"}
    assert bench_imports("from ..timing import compare", view) == {"bench.timing"}
    assert bench_imports("from . import serialization", view) == {"bench.views.serialization"}
    assert bench_imports("from bench.views import stored", view) == {"bench.views.stored"}
    assert bench_imports("import bench.measurements.save_speed", view) == {
        "bench.measurements.save_speed"
    }
    assert bench_imports("importlib.import_module('bench.fmt')", view) == {"<import at run time>"}
    assert not bench_imports("import json\nfrom typing import Any", view)
