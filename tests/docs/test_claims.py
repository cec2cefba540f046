"""The claims ledger, docs/claims.yml: every entry resolves, every python fence is accounted for.

An entry's status says which command proves it, and the test checks that it does:

- `make-test`: its proof runs in `make test` (the inner loop);
- `make-test-all`: its proof runs only in `make test-all` (the heavy, slow or full tiers);
- `recorded`: its proof reads results a measurement recorded and the repository keeps
  (docs/assets/bench/); the command that records them is named in the proof;
- `stated`: nothing here runs it, and `reason` says why.

Every entry also carries `quote:`, the claimed sentence (or a distinctive part of it) as the
built page renders it; tests/site/test_claim_quotes.py checks that it stands in the named
section, so editing a claimed sentence fails until someone re-reads its proof. A proof is either

- a fence, `PAGE.md#ID`: the python fence on PAGE written ```` ```{.python #ID} ````
  (superfences puts the id on the rendered block, so the claims page links to it), or
- a test, `tests/PATH.py::NAME`: a pytest node id.

A proof counts only if pytest collects it and its code contains an assertion: an `assert`
statement, a `raise`, or a call to a function whose name starts with `assert`
(`torch.testing.assert_close`, `np.testing.assert_array_equal`) or is `raises`
(`pytest.raises`). For a fence, its own lines and the files or sections it includes are
read; for a test, the test function's body. A helper that asserts on the fence's behalf
does not count: the assertion must be visible where the proof is.

Every python fence on every page is either the proof of some entry (it has an id that an
entry names), an exercise's solution, ```` ```{.python .exercise} ```` (run, and it must assert
its answer), or is marked as an illustration, ```` ```{.python .illustration} ````, which
renders as a class on the block and is still run. Pages listed under `pending_pages` in the
ledger are not yet ledgered: their fences are reported, not failed.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import collection
import markdown
import pytest
import yaml

from page_fences.census import INCLUDE_LINE, PYTHON_LANGS, Fence, fences, pages

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
LEDGER = DOCS / "claims.yml"
ILLUSTRATION = ".illustration"
# An exercise's folded solution: run with the page and asserting its answer, so that a solution
# that stops being right fails the suite; it proves no claim of the ledger.
EXERCISE = ".exercise"
# Statuses with a proof, and what runs it.
PROVED = {
    "make-test": "`make test`",
    "make-test-all": "`make test-all`",
    "recorded": "reads recorded results",
}
# The marker expression of `make test` (Makefile, INNER).
INNER = collection.INNER
# A proof whose code names the committed results folders (or reads the recorded runs on other
# torch releases, versions/matrix.py) reads recorded results.
READS_RECORDED = re.compile(
    r"""assets/(bench|versions)|["']assets["']\s*/\s*["']bench["']|\bmatrix\.run"""
)
ENTRY_ID = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
FENCE_PROOF = re.compile(r"^(?P<page>[\w-]+\.md)#(?P<id>[\w-]+)$")
FENCE_LINE = re.compile(r"\[line:(\d+)\]$")  # a page fence's node id ends so
TEST_PROOF = re.compile(r"^(?P<file>tests/[\w/]+\.py)::(?P<name>\w+)(?P<params>\[.*\])?$")
FILL_IN = (
    "\n\nTo fill it in: give the fence an id, ```{.python #some-id}, and add to "
    f"{LEDGER.relative_to(ROOT)} an entry\n"
    "  - id: some-claim\n"
    "    claim: One sentence, in our words.\n"
    "    page: PAGE.md#section-anchor\n"
    "    source: course   # or site\n"
    "    status: make-test   # or make-test-all, recorded (see the ledger's header)\n"
    "    quote: The sentence as the page renders it.\n"
    "    proof: PAGE.md#some-id\n"
    "or mark the fence as not proving anything: ```{.python .illustration}"
)


@cache
def ledger() -> dict:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when installed
    return yaml.load(LEDGER.read_text("utf8"), Loader=loader)


def entries() -> list[dict]:
    return ledger()["claims"]


def pending_pages() -> dict[str, str]:
    return ledger().get("pending_pages") or {}


def fence_id(fence: Fence) -> str | None:
    return next((w[1:] for w in fence.options if w.startswith("#")), None)


def python_fences(page: Path) -> list[Fence]:
    """Every python fence, including `notest` ones (those can only be illustrations)."""
    return [f for f in fences(page.read_text("utf8")) if f.lang in PYTHON_LANGS]


@cache
def fences_by_id() -> dict[tuple[str, str], Fence]:
    found: dict[tuple[str, str], Fence] = {}
    for page in pages(DOCS):
        for fence in python_fences(page):
            if (name := fence_id(fence)) is not None:
                found[(page.name, name)] = fence
    return found


@cache
def rendered_ids(page_name: str) -> tuple[str, ...]:
    """The id of every element on the page as Python-Markdown renders it with the site's set-up."""
    from mkdocs.config import load_config

    config = load_config(str(ROOT / "mkdocs.yml"))
    configs = dict(config["mdx_configs"])
    configs["pymdownx.snippets"] = {**configs["pymdownx.snippets"], "base_path": [str(ROOT)]}
    # Pygments gives the code its colours and no element id (the ids are the same without it);
    # it is three quarters of the time of rendering the pages.
    configs["pymdownx.highlight"] = {**configs.get("pymdownx.highlight", {}), "use_pygments": False}
    md = markdown.Markdown(extensions=config["markdown_extensions"], extension_configs=configs)
    text = (DOCS / page_name).read_text("utf8")
    text = re.sub(r"\A---\n.*?\n---\n", "", text, flags=re.S)  # front matter
    return tuple(re.findall(r'\bid="([^"]+)"', md.convert(text)))


@cache
def collected(markers: str = "") -> frozenset[str]:
    """Node ids pytest collects from the pages and from every test file a proof names, with
    `-m markers` (every one by default; INNER: those `make test` runs): this session's own
    collection when it holds them, as under `make test` (tests/support/collection.py)."""
    files = {m["file"] for e in entries() if (m := TEST_PROOF.match(str(e.get("proof", ""))))}
    found = collection.collected(ROOT, ["docs", *files])
    return found.inner if markers == INNER else found.ids


def has_assertion(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert | ast.Raise):
            return True
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name.startswith("assert") or name == "raises":
                return True
    return False


@cache
def fence_nodes() -> dict[tuple[str, int], list[str]]:
    """The node ids collected from each page, by (page, fence line)."""
    nodes: dict[tuple[str, int], list[str]] = {}
    for node in collected():
        path, _, rest = node.partition("::")
        if path.startswith("docs/") and (line := FENCE_LINE.search(rest)):
            nodes.setdefault((path.removeprefix("docs/"), int(line[1])), []).append(node)
    return nodes


@cache
def functions_of(file: str) -> dict[str, tuple[ast.FunctionDef, str]]:
    """Each function of a test file, with its source."""
    text = (ROOT / file).read_text("utf8")
    lines = text.splitlines()
    return {
        node.name: (node, "\n".join(lines[node.lineno - 1 : node.end_lineno]))
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.FunctionDef)
    }


@cache
def asserts(code: str) -> bool:
    return has_assertion(ast.parse(code))


def fence_sources(fence: Fence, resolve) -> list[tuple[str, str]]:
    """(where, code) for the fence's own lines and for each file or section it includes."""
    own = [line[len(fence.indent) :] for line in fence.body if not INCLUDE_LINE.match(line)]
    parts = [("the fence", "\n".join(own))]
    for line in fence.body:
        if included := INCLUDE_LINE.match(line):
            _path, _first, lines = resolve(included["target"])
            parts.append((included["target"], "\n".join(lines)))
    return parts


def proof_problems(entry: dict, resolve) -> list[str]:
    problems, tier = proof_tier(entry, resolve)
    status = entry.get("status")
    if tier is not None and status != tier:
        problems.append(
            f"status {status!r}, but its proof is {tier!r}: {PROVED[tier]} "
            + ("runs it" if tier != "recorded" else "(it reads docs/assets/bench)")
        )
    return problems


def proof_tier(entry: dict, resolve) -> tuple[list[str], str | None]:
    """What is wrong with the entry's proof, and which status it earns (None if unresolved)."""
    proof = str(entry["proof"])
    if fence := FENCE_PROOF.match(proof):
        page, name = fence["page"], fence["id"]
        if not (DOCS / page).is_file():
            return [f"proof {proof}: no page docs/{page}"], None
        found = fences_by_id().get((page, name))
        if found is None:
            return [
                f"proof {proof}: no python fence written ```{{.python #{name}}} on {page}"
            ], None
        problems = []
        if "notest" in found.options:
            problems.append(f"proof {proof}: the fence is notest, so it never runs")
        ours = fence_nodes().get((page, found.line), [])
        if not ours:
            problems.append(f"proof {proof}: pytest collects no fence at {page}:{found.line}")
        sources = fence_sources(found, resolve)
        if not any(asserts(code) for _, code in sources):
            problems.append(
                f"proof {proof} ({page}:{found.line}): no assertion in "
                + ", ".join(where for where, _ in sources)
            )
        code = "\n".join(code for _, code in sources)
        return problems, tier_of(code, inner=bool(set(ours) & collected(INNER)))
    if test := TEST_PROOF.match(proof):
        path = ROOT / test["file"]
        if not path.is_file():
            return [f"proof {proof}: no file {test['file']}"], None
        functions = functions_of(test["file"])
        if test["name"] not in functions:
            return [f"proof {proof}: {test['file']} defines no {test['name']}"], None
        function, code = functions[test["name"]]
        problems = []
        if proof not in collected():
            problems.append(f"proof {proof}: pytest does not collect it")
        if not has_assertion(function):
            problems.append(f"proof {proof}: the test has no assertion")
        return problems, tier_of(code, inner=proof in collected(INNER))
    return [f"proof {proof!r}: neither PAGE.md#FENCE-ID nor tests/FILE.py::TEST"], None


def tier_of(code: str, *, inner: bool) -> str:
    if READS_RECORDED.search(code):
        return "recorded"
    return "make-test" if inner else "make-test-all"


def entry_problems(entry: dict) -> list[str]:
    problems = []
    keys = set(entry)
    required = {"id", "claim", "page", "source", "status"}
    if missing := required - keys:
        problems.append(f"missing fields {sorted(missing)}")
    if not ENTRY_ID.match(str(entry.get("id", ""))):
        problems.append("id must be lower-case words joined by hyphens")
    claim = str(entry.get("claim", ""))
    if not claim.endswith(".") or "\n" in claim:
        problems.append("claim must be one sentence, ending with a full stop")
    if entry.get("source") not in ("course", "site"):
        problems.append("source must be `course` (the course text says it) or `site`")
    status = entry.get("status")
    if status in PROVED:
        if "proof" not in keys or "reason" in keys:
            problems.append(f"a claim with status {status} has a proof and no reason")
    elif status == "stated":
        if not entry.get("reason") or "proof" in keys:
            problems.append("a stated claim has a reason and no proof")
    else:
        problems.append(f"status must be one of {', '.join([*PROVED, 'stated'])}")
    page, _, anchor = str(entry.get("page", "")).partition("#")
    if not (DOCS / page).is_file() or not page.endswith(".md"):
        problems.append(f"page {page!r}: no such page in docs/")
    elif not anchor:
        problems.append("page needs a section anchor: PAGE.md#anchor")
    elif anchor not in rendered_ids(page):
        problems.append(f"page {page}: no anchor #{anchor} (as MkDocs renders the page)")
    return problems


def test_the_ledger_is_well_formed():
    ids = [e.get("id") for e in entries()]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    assert not duplicates, f"duplicate ids in the ledger: {duplicates}"
    problems = [f"{e.get('id')}: {p}" for e in entries() for p in entry_problems(e)]
    assert not problems, "\n".join(problems)
    assert set(pending_pages()) <= {p.name for p in pages(DOCS)}


def test_every_proof_resolves_is_collected_and_asserts(include_resolver):
    problems = [
        f"{e['id']}: {p}"
        for e in entries()
        if e.get("status") in PROVED
        for p in proof_problems(e, include_resolver)
    ]
    assert not problems, "\n".join(problems)


def test_fence_ids_are_unique_and_do_not_clash_with_headings():
    seen: dict[str, str] = {}
    problems = []
    for page in pages(DOCS):
        for fence in python_fences(page):
            name = fence_id(fence)
            if name is None:
                continue
            if name in seen:
                problems.append(f"{page.name}:{fence.line}: id #{name} is also on {seen[name]}")
            seen[name] = f"{page.name}:{fence.line}"
            if rendered_ids(page.name).count(name) != 1:
                problems.append(f"{page.name}:{fence.line}: #{name} is not one element's id")
    assert not problems, "\n".join(problems)


def unaccounted(page: Path) -> list[str]:
    proofs = {str(e.get("proof")) for e in entries() if e.get("status") in PROVED}
    found = []
    for fence in python_fences(page):
        name, illustration = fence_id(fence), ILLUSTRATION in fence.options
        where = f"{page.relative_to(ROOT)}:{fence.line}"
        if EXERCISE in fence.options:
            if name or illustration or "notest" in fence.options:
                found.append(f"{where}: an exercise's solution has no id, {ILLUSTRATION} or notest")
            elif not has_assertion_in(fence):
                found.append(f"{where}: an exercise's solution must assert its answer")
        elif name and illustration:
            found.append(f"{where}: both an id (#{name}) and {ILLUSTRATION}; choose one")
        elif name and f"{page.name}#{name}" not in proofs:
            found.append(f"{where}: fence #{name} is the proof of no entry in the ledger")
        elif not name and not illustration:
            found.append(f"{where}: a python fence with neither an id nor {ILLUSTRATION}")
        elif illustration and "notest" not in fence.options and has_assertion_in(fence):
            found.append(
                f"{where}: marked {ILLUSTRATION} but it asserts something; "
                "give it an id and a ledger entry"
            )
    return found


def has_assertion_in(fence: Fence) -> bool:
    own = "\n".join(line[len(fence.indent) :] for line in fence.body)
    try:
        return has_assertion(ast.parse(own))
    except SyntaxError:
        return False


@pytest.mark.parametrize("page", pages(DOCS), ids=lambda p: p.name)
def test_every_python_fence_proves_a_claim_or_is_an_illustration(page: Path):
    found = unaccounted(page)
    if page.name in pending_pages() and found:
        pytest.xfail(
            f"{page.name} is pending ({pending_pages()[page.name]}); not yet accounted for:\n"
            + "\n".join(found)
            + FILL_IN
        )
    assert not found, "\n".join(found) + FILL_IN


def test_counts_are_computed_and_the_promise_holds():
    text = (DOCS / "index.md").read_text("utf8")
    claims_page = (DOCS / "claims.md").read_text("utf8")
    for count in ("total", "make_test", "make_test_all", "recorded", "stated"):
        placeholder = f"{{{{ claims.{count} }}}}"
        assert placeholder in text and placeholder in claims_page, placeholder
    assert "{{ claims.tables }}" in claims_page
    asserted = sum(e["status"] in PROVED for e in entries())
    assert asserted >= 0.95 * len(entries()), f"{asserted} of {len(entries())} asserted"
