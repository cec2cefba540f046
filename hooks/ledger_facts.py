"""The claims ledger's facts: `{{ claims.NAME }}`, counts and tables computed from
docs/claims.yml. Not a hook of its own: hooks/build_facts.py registers it for the prefix
`claims`.

- counts: `claims.total`, `claims.make_test`, `claims.make_test_all`, `claims.recorded`,
  `claims.stated`, `claims.percent`, ...;
- `claims.tables` (one table per page, in the nav's order), `claims.stated_list`,
  `claims.corrections`, `claims.pending`.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
LEDGER = DOCS / "claims.yml"


_ledger_cache: dict[tuple[int, int], dict] = {}


def ledger() -> dict:
    """The parsed ledger, read again only when the file changes (a page may ask many times)."""
    import yaml

    status = LEDGER.stat()
    key = (status.st_mtime_ns, status.st_size)
    if key not in _ledger_cache:
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: ten times faster
        _ledger_cache.clear()
        _ledger_cache[key] = yaml.load(LEDGER.read_text("utf8"), Loader=loader)
    return _ledger_cache[key]


def page_title(name: str) -> str:
    text = (DOCS / name).read_text("utf8")
    found = re.search(r"^title:\s*(?P<title>.+)$", text, re.M)
    return found["title"].strip().strip('"') if found else name


def page_order() -> list[str]:
    """Pages in the order the nav lists them (mkdocs.yml), then any others."""
    text = (ROOT / "mkdocs.yml").read_text("utf8")
    nav = re.findall(r"^\s*-\s*(?:[^:\n]+:\s*)?([\w-]+\.md)\s*$", text, re.M)
    return nav + sorted(p.name for p in DOCS.glob("*.md") if p.name not in nav)


# The page being rendered and the site's files, for links MkDocs does not rewrite itself
# (hooks/build_facts.py sets them before each page).
rendering: dict = {}


def proof_link(proof: str) -> str:
    if "::" in proof:
        return f"test `{proof}`"
    # A fence's id is on superfences' raw HTML, which MkDocs' link check cannot see: write the
    # link as HTML, addressed as MkDocs addresses the page (tests/docs/test_claims.py checks ids).
    name, _, fence_id = proof.partition("#")
    page, files = rendering.get("page"), rendering.get("files")
    target = files.get_file_from_path(name) if files is not None else None
    if page is None or target is None:
        return f"[code]({name})"
    from mkdocs.utils import get_relative_url

    return f'<a href="{get_relative_url(target.url, page.url)}#{fence_id}">code</a>'


# What each status means on the claims page, in the ledger's words (docs/claims.yml).
STATUS_WORDS = {
    "make-test": "proved by `make test`",
    "make-test-all": "proved by `make test-all` only",
    "recorded": "reads recorded results",
}


def claims_counts() -> dict[str, int]:
    entries = ledger()["claims"]
    proved = [e for e in entries if e["status"] in STATUS_WORDS]
    course = [e for e in entries if e.get("source") == "course"]
    return {
        "total": len(entries),
        "asserted": len(proved),
        "make_test": sum(e["status"] == "make-test" for e in entries),
        "make_test_all": sum(e["status"] == "make-test-all" for e in entries),
        "recorded": sum(e["status"] == "recorded" for e in entries),
        "stated": len(entries) - len(proved),
        "percent": 100 * len(proved) // len(entries),
        "course_total": len(course),
        "course_asserted": sum(e["status"] in STATUS_WORDS for e in course),
        "pages": len({e["page"].partition("#")[0] for e in entries}),
    }


def claims_tables() -> str:
    entries = ledger()["claims"]
    blocks = []
    for name in page_order():
        rows = [e for e in entries if e["page"].partition("#")[0] == name]
        if not rows:
            continue
        counts = ", ".join(
            f"{n} {words}"
            for status, words in [*STATUS_WORDS.items(), ("stated", "stated")]
            if (n := sum(e["status"] == status for e in rows))
        )
        lines = [
            f"## {page_title(name)}",
            "",
            f"[{page_title(name)}]({name}): {len(rows)} claims; {counts}.",
            "",
            "| claim | status | stated in | proof |",
            "| --- | --- | --- | --- |",
        ]
        for e in rows:
            status = STATUS_WORDS.get(e["status"]) or f"stated: {e['reason']}"
            proof = proof_link(e["proof"]) if e["status"] in STATUS_WORDS else "—"
            claim = e["claim"].replace("|", "\\|")
            status = status.replace("|", "\\|")
            lines.append(f"| {claim} | {status} | [section]({e['page']}) | {proof} |")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def claims_stated_list() -> str:
    return "\n".join(
        f"- {e['claim']} *Stated: {e['reason']}* ([where]({e['page']}))"
        for e in ledger()["claims"]
        if e["status"] == "stated"
    )


# The page that lists the corrections has its own table of them (docs/changes.md).
CORRECTIONS_PAGE = "changes.md"


def claims_corrections() -> str:
    """The ledger's entries with `corrects`, of every page but the one listing them."""
    return "\n".join(
        f"- The course text: {e['corrects']} Here: {e['claim']} ([where]({e['page']}))"
        for e in ledger()["claims"]
        if e.get("corrects") and e["page"].partition("#")[0] != CORRECTIONS_PAGE
    )


def claims_pending() -> str:
    pending = ledger().get("pending_pages") or {}
    if not pending:
        return "Every page is in the ledger."
    names = ", ".join(f"[{page_title(name)}]({name})" for name in pending)
    return f"Not yet in the ledger: {names}."


def value(name: str, spec: str | None = None) -> str:
    renderers = {
        "tables": claims_tables,
        "stated_list": claims_stated_list,
        "corrections": claims_corrections,
        "pending": claims_pending,
    }
    if name in renderers:
        return renderers[name]()
    counts = claims_counts()
    if name not in counts:
        raise LookupError(f"unknown claims fact; known: {', '.join([*counts, *renderers])}")
    return str(counts[name])
