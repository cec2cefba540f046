"""Put facts computed at build time into the pages: the one facts hook.

A page never types a version or a printed result: it names one, `{{ PREFIX.REST }}`, and the
build fills it in. Each source of facts registers its prefix (`@source("bench")`); this hook
finds every placeholder on a page and asks the source its prefix names, so no second hook has to
run first and the order of `hooks:` in mkdocs.yml does not matter.

- `{{ version.torch }}`, `{{ verified_with }}`: what is installed (bench/provenance.py, the same
  function the benchmarks and the fault campaign record their versions with).
- `{{ output.NAME }}`: what `snippets/NAME.py` prints when run (the same file the page includes
  and the tests execute), run once per build in a temporary folder, seeded as the tests seed it.
- `{{ bench.FILE.KEY.SUBKEY }}`: from `docs/assets/bench/FILE.json`, the numbers `make bench`
  last measured, seen through FILE's one view in bench/views/: the stored numbers plus what the
  page words from them (tables, verdicts, sentences), computed now, so rewording needs no new
  measurement.
- `{{ lab.KEY.SUBKEY }}`, `{{ lab.summary }}`: the lab's demo, run once per build
  (hooks/lab_report.py, which also draws `assets/lab/curves.png`).
- `{{ fence.ID.NAME }}`: the value of `NAME` after the fence marked `{.python #ID}` (on any page)
  has run, seeded as the tests seed it: a figure in the prose is the one its proof computed.
  A format spec may follow a colon: `{{ fence.clip-nonfinite.entries:, }}`. Integers are
  printed with thousands separators unless a format is given.
- `{{ versions.NAME }}`: the runs of the ledger's proofs on other torch releases that
  `make test-versions` recorded in `docs/assets/versions/` (versions/matrix.py).
- `{{ claims.NAME }}`: counts and tables computed from the claims ledger, `docs/claims.yml`
  (`claims.total`, `claims.make_test`, `claims.make_test_all`, `claims.recorded`,
  `claims.stated`, `claims.tables`, ...).
- `{{ recipe.NAME }}`: from `snippets/recipe.py`'s syntax tree, read now: where it defines the
  top-level function NAME, decorators included (`{{ recipe.save_checkpoint }}` gives
  "lines A–B"; `{{ recipe.FIRST-LAST }}`, from one function's first line to another's last),
  or the value of its constant NAME in upper case (`{{ recipe.micro_batch }}`
  gives MICRO_BATCH's 32); `{{ recipe.length }}`: how many lines the file has. A page points at
  the recipe's lines and quotes its settings without typing a number an edit would make wrong.

An unknown name fails the build, so a typo cannot reach a reader.
"""

from __future__ import annotations

import ast
import contextlib
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from mkdocs.exceptions import PluginError

PLACEHOLDER = re.compile(
    r"\{\{\s*(?P<name>[a-z_]+(?:\.[a-z0-9_-]+)*)(?::(?P<format>[^}\s]+))?\s*\}\}"
)
# Anything that looks like a placeholder but escaped PLACEHOLDER (an upper-case name, a stray
# space): left alone it would reach the page as text, so the build stops instead.
LOOKS_LIKE_ONE = re.compile(r"\{\{\s*[A-Za-z_][^{}]*\}\}")


ROOT = Path(__file__).resolve().parent.parent
# What the sources import: bench/ (provenance, the results' views), versions/ and page_fences/
# (how a fence runs, the same as under pytest, so a figure the build computes is the one the
# fence computes in the tests) are installed with the lab (pyproject.toml); build_cache,
# lab_report and ledger_facts are the hook's neighbours, importable while MkDocs loads this
# hook (it puts hooks/ on sys.path then).
import build_cache  # noqa: E402
import lab_report  # noqa: E402
import ledger_facts  # noqa: E402
from bench import provenance  # noqa: E402
from page_fences.census import fences  # noqa: E402
from page_fences.includes import Part, segments  # noqa: E402
from page_fences.run import figures, printed  # noqa: E402
from versions import matrix as versions_matrix  # noqa: E402

# --- the registry: one source per prefix ---------------------------------------------------

Source = Callable[[str, "str | None"], str]
SOURCES: dict[str, Source] = {}


SourceT = TypeVar("SourceT", bound=Source)


def source(prefix: str) -> Callable[[SourceT], SourceT]:
    """Register `fn(rest, format_spec) -> str` for `{{ PREFIX.REST }}` (or `{{ PREFIX }}`)."""

    def register(fn: SourceT) -> SourceT:
        if prefix in SOURCES:
            raise ValueError(f"two sources of facts claim the prefix {prefix!r}")
        SOURCES[prefix] = fn
        return fn

    return register


def lookup(name: str, spec: str | None = None) -> str:
    prefix, _, rest = name.partition(".")
    if prefix not in SOURCES:
        raise LookupError(f"unknown fact; known prefixes: {', '.join(sorted(SOURCES))}")
    return SOURCES[prefix](rest, spec)


# --- what is installed: {{ version.NAME }}, {{ verified_with }} ----------------------------


def installed() -> dict[str, str]:
    return provenance.versions("mkdocs-material")


@source("version")
def version_value(name: str, spec: str | None) -> str:
    versions = installed()
    package = name.replace("_", "-")
    if package not in versions:
        known = ", ".join(f"version.{v.replace('-', '_')}" for v in versions)
        raise LookupError(f"unknown fact; known: {known}")
    return versions[package]


@source("verified_with")
def verified_with(rest: str = "", spec: str | None = None) -> str:
    if rest:
        raise LookupError("unknown fact; verified_with takes no key")
    v = installed()
    return (
        f"torch {v['torch']}, numpy {v['numpy']}, safetensors {v['safetensors']}, "
        f"Python {v['python']}"
    )


@source("lab")
def lab_value(path: str, spec: str | None) -> str:
    return lab_report.value(path)


# Every page says which versions its code blocks were executed on.
# One short line: the versions this copy of the page was tested with.
VERIFIED_FOOTER = "\n\n<small>Tested with {}.</small>\n"


@source("output")
def snippet_output(name: str, spec: str | None = None) -> str:
    """What snippets/NAME.py prints, computed once for its code (hooks/build_cache.py)."""
    path = ROOT / "snippets" / f"{name.replace('.', '/')}.py"
    if not path.is_file():
        raise LookupError(f"no snippet {path.relative_to(ROOT)}")
    key = build_cache.key("output", [(str(path), path.read_text("utf8"))])
    return build_cache.cached("output", key, lambda: printed(path), what=name)


@source("bench")
def bench_value(dotted: str, spec: str | None = None) -> str:
    """A value from docs/assets/bench/FILE.json, by its dotted path, through FILE's view
    (bench/views/), put in as the view words it."""
    from bench import views

    file, _, path = dotted.partition(".")
    results = ROOT / "docs" / "assets" / "bench" / f"{file}.json"
    if not results.is_file():
        raise LookupError(f"no results {results.relative_to(ROOT)}: run `make bench`")
    value = views.view(file, json.loads(results.read_text("utf8")))
    for key in path.split("."):
        if not isinstance(value, dict) or key not in value:
            raise LookupError(f"{results.relative_to(ROOT)} has no {path!r} (stuck at {key!r})")
        value = value[key]
    return str(value)


# --- figures computed by a page's own proof: {{ fence.ID.NAME }} ---------------------------

DOCS = ROOT / "docs"
# The types a figure may have once a tensor or NumPy scalar is turned into a number (`.item()`).
FIGURE_TYPES = (bool, int, float, str)


def fence_source(fence_id: str) -> tuple[Path, list[Part]]:
    """The page holding fence {.python #ID} and its code as parts, each included file under its
    own name, every part on its own line numbers (as the tests run it)."""
    for page in sorted(DOCS.rglob("*.md")):
        for fence in fences(page.read_text("utf8")):
            if fence.brace_form and f"#{fence_id}" in fence.options:
                body = [text[len(fence.indent) :] for text in fence.body]
                source = "\n" * fence.line + "\n".join(body)
                return page, list(segments(source, str(page), ROOT))
    raise LookupError(f"no fence {{.python #{fence_id}}} on any page")


def fence_figures(parts: list[Part]) -> dict[str, bool | int | float | str]:
    """Run the fence (page_fences/run.py) and keep every figure its namespace holds."""
    found = {}
    for name, value in figures(parts).items():
        with contextlib.suppress(Exception):  # `.item()` of a tensor of many numbers, say
            value = value.item() if callable(getattr(value, "item", None)) else value
        if type(value) in FIGURE_TYPES:
            found[name] = value
    return found


@source("fence")
def fence_value(dotted: str, spec: str | None) -> str:
    """A figure the fence {.python #ID} computed, computed once for its code and for every
    file of the repository it imports (hooks/build_cache.py)."""
    fence_id, _, name = dotted.partition(".")
    _, parts = fence_source(fence_id)
    # The parts' code, not where it stands: an edit above the fence moves it, changing nothing.
    code = [(part.filename, part.source.lstrip("\n")) for part in parts]
    key = build_cache.key("fence", code)
    found = build_cache.cached("fence", key, lambda: fence_figures(parts), what=fence_id)
    if name not in found:
        raise LookupError(f"fence #{fence_id} defines no number or string {name!r}")
    value = found[name]
    if spec is not None:
        return format(value, spec)
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


# --- where the recipe does it: {{ recipe.NAME }}, {{ recipe.length }} ----------------------

RECIPE = ROOT / "snippets" / "recipe.py"


def definitions(path: Path) -> tuple[dict[str, tuple[int, int]], dict[str, object]]:
    """Each top-level function or class of `path`, with its first line (a decorator's, if it has
    one) and its last; and each top-level constant assigned a literal (`MICRO_BATCH = 32`)."""
    spans: dict[str, tuple[int, int]] = {}
    constants: dict[str, object] = {}
    for node in ast.parse(path.read_text("utf8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            spans[node.name] = (first, node.end_lineno or node.lineno)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id.isupper():
                    constants[target.id] = node.value.value
    return spans, constants


@source("recipe")
def recipe_fact(name: str, spec: str | None = None) -> str:
    """`recipe.FUNCTION` -> "lines A–B"; `recipe.FIRST-LAST` -> from FIRST's first line to
    LAST's last; `recipe.constant` -> CONSTANT's value (names are lower-case in a placeholder);
    `recipe.length` -> the file's number of lines."""
    if name == "length":
        return str(len(RECIPE.read_text("utf8").splitlines()))
    spans, constants = definitions(RECIPE)
    start, _, end = name.partition("-")  # `recipe.fsync_dir-write_synced`: from one to the other
    if start in spans and (end or start) in spans:
        first, last = spans[start][0], spans[end or start][1]
        if last < first:
            raise LookupError(f"{end!r} comes before {start!r} in {RECIPE.relative_to(ROOT)}")
        return f"lines {first}\u2013{last}"
    if name.upper() in constants:
        value = constants[name.upper()]
        return format(value, spec) if spec is not None else str(value)
    known = [n for n in spans if n == n.lower()] + [c.lower() for c in constants]
    raise LookupError(
        f"{RECIPE.relative_to(ROOT)} defines no top-level function or constant {name!r}; "
        f"known: recipe.length, {', '.join(f'recipe.{n}' for n in known)}"
    )


# --- other torch releases: {{ versions.NAME }} ----------------------------------------------


@source("versions")
def versions_value(name: str, spec: str | None = None) -> str:
    """From the runs `make test-versions` recorded (versions/matrix.py)."""
    return versions_matrix.value(name, installed()["torch"])


# --- the claims ledger: {{ claims.NAME }} (hooks/ledger_facts.py) --------------------------


@source("claims")
def claims_value(name: str, spec: str | None = None) -> str:
    return ledger_facts.value(name, spec)


# --- the hook ----------------------------------------------------------------------------


def on_pre_build(config) -> None:
    """Each build (`mkdocs serve` makes one per edit) looks its inputs up afresh."""
    build_cache.new_build()


def on_files(files, config):
    """Files the facts bring with them: the lab's loss curves."""
    return lab_report.add_files(files, config)


def on_page_markdown(markdown: str, page, config, files) -> str:
    ledger_facts.rendering.update(page=page, files=files)

    def fill(match: re.Match) -> str:
        try:
            value = lookup(match["name"], match["format"])
        except Exception as err:
            raise PluginError(f"{page.file.src_uri}: {match[0]}: {err}") from err
        # A placeholder alone on an indented line (a fence or a table inside a fold) gives
        # every line of its value that indentation, so the value stays inside the container.
        line_start = markdown.rfind("\n", 0, match.start()) + 1
        indent = markdown[line_start : match.start()]
        if indent and not indent.strip():
            value = value.replace("\n", "\n" + indent)
        return value

    filled = PLACEHOLDER.sub(fill, markdown)
    for left in LOOKS_LIKE_ONE.finditer(filled):
        raise PluginError(
            f"{page.file.src_uri}: {left[0]} was not filled in: a fact's name is lower-case "
            "words joined by dots, PREFIX.NAME[:FORMAT]"
        )
    return filled + VERIFIED_FOOTER.format(verified_with())
