"""Every claim's quote stands in its section of the built page.

Each entry of the claims ledger (docs/claims.yml) names a section (`page: PAGE.md#anchor`) and
quotes the sentence that states the claim (`quote:`), exactly as the built page renders it. The
test reads the built page, takes the text of that section (from its heading up to the next
heading of the same or a higher level, folds included) and looks for the quote in it. So a
sentence edited after its proof was written fails here, naming the entry, until someone reads
the proof again and copies the new wording.

Whitespace is collapsed before comparing; everything else (case, punctuation, rendered figures)
must match. Run it on a build of your own while you edit a page (PAGE.md limits it to one):

    .venv/bin/mkdocs build -d /tmp/site
    .venv/bin/python tests/site/test_claim_quotes.py /tmp/site [PAGE.md ...]
"""

from __future__ import annotations

import html
import re
import sys
from functools import cache
from html.parser import HTMLParser
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
LEDGER = ROOT / "docs" / "claims.yml"
HEADING = re.compile(r"^h([1-6])$")
SKIPPED = {"script", "style"}


class Sections(HTMLParser):
    """The article's text, cut at its headings: [(level, id, text)], level 0 before the first."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.sections: list[tuple[int, str, list[str]]] = [(0, "", [])]
        self.in_article = 0
        self.skipped: list[str] = []  # open tags whose text is not prose (scripts, the ¶ links)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "article":
            self.in_article += 1
        if tag in SKIPPED or "headerlink" in (attributes.get("class") or ""):
            self.skipped.append(tag)
        if self.in_article and (heading := HEADING.match(tag)):
            self.sections.append((int(heading[1]), attributes.get("id") or "", []))

    def handle_endtag(self, tag: str) -> None:
        if tag == "article":
            self.in_article -= 1
        if self.skipped and self.skipped[-1] == tag:
            self.skipped.pop()

    def handle_data(self, data: str) -> None:
        if self.in_article and not self.skipped:
            self.sections[-1][2].append(data)


def normal(text: str) -> str:
    return " ".join(html.unescape(text).replace("\u00a0", " ").split())


@cache
def section_texts(page_html: Path) -> dict[str, str]:
    """anchor → the text of that section and of every section nested in it."""
    parser = Sections()
    parser.feed(page_html.read_text("utf8"))
    sections = parser.sections
    texts = {}
    for i, (level, anchor, _) in enumerate(sections):
        if not anchor:
            continue
        parts = []
        for inner_level, _, text in sections[i:]:
            if inner_level <= level and parts:
                break
            parts.append("".join(text))
        texts[anchor] = normal(" ".join(parts))
    return texts


def built_page(site_root: Path, page: str) -> Path:
    return site_root / page.replace(".md", ".html")  # use_directory_urls: false (mkdocs.yml)


def quote_problems(site_root: Path, entries: list[dict]) -> list[str]:
    problems = []
    for entry in entries:
        quote = entry.get("quote")
        page, _, anchor = str(entry["page"]).partition("#")
        if not isinstance(quote, str) or not quote.strip():
            problems.append(f"{entry['id']}: no quote (the sentence as {page} renders it)")
            continue
        texts = section_texts(built_page(site_root, page))
        if anchor not in texts:
            problems.append(f"{entry['id']}: {page} has no heading #{anchor}")
        elif normal(quote) not in texts[anchor]:
            problems.append(
                f"{entry['id']}: {page}#{anchor} does not say {quote!r}; "
                "read the proof again against the page's sentence, then copy it"
            )
    return problems


@cache
def ledger_entries() -> list[dict]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when installed
    return yaml.load(LEDGER.read_text("utf8"), Loader=loader)["claims"]


def test_every_quote_stands_in_its_section(site):
    problems = quote_problems(site.root, ledger_entries())  # an entry without one fails
    assert not problems, f"{len(problems)} entries:\n" + "\n".join(problems)


def test_a_changed_sentence_fails_its_entry(site):
    entry = ledger_entries()[0]
    page, _, anchor = entry["page"].partition("#")
    words = section_texts(built_page(site.root, page))[anchor].split()
    entry = {**entry, "quote": " ".join(words[-8:])}  # the section's last words, as rendered
    assert not quote_problems(site.root, [entry])
    changed = {**entry, "quote": entry["quote"] + " (edited)"}
    assert quote_problems(site.root, [changed])
    elsewhere = {**entry, "page": "claims.md#stated-and-why"}
    assert quote_problems(site.root, [elsewhere])


if __name__ == "__main__":
    site_root = Path(sys.argv[1])
    only = set(sys.argv[2:])
    chosen = [e for e in ledger_entries() if not only or e["page"].partition("#")[0] in only]
    found = quote_problems(site_root, chosen)
    print("\n".join(found) or f"all {len(chosen)} quotes found")
    sys.exit(1 if found else 0)
