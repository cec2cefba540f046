"""The reading path as a learner meets it: every page of the nav outside Evidence, opened from
disk in Chromium at 1280x900 with every <details> closed (proofs and solutions folded).

Measured on every build, and failing above the targets, naming the page:
- a chapter page is at most 15 screens tall and has at most 2,500 words of visible prose;
- the whole reading path (the overview, the recipe, the chapter pages, the glossary) is at most
  120 screens;
- at most 1 in 5 of a page's visible code blocks is test code (it contains `pytest` or
  `MonkeyPatch`, or three or more `assert` lines);
- no visible code block is taller than two screens;
- every visible Python block pastes: it uses no name it does not define or import (ruff's
  F821 on the block's shown text), or it is an excerpt, with a link right before it to its whole
  file in the repository (`[...](repo:PATH)`, hooks/source_links.py).

/work/shared/hooks/reading.py measures the same quantities; the numbers here agree with it.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urljoin

import pytest
from browser_site import NavPage, mkdocs_config, nav_pages
from built_site import ROOT, BuiltSite

pytestmark = [pytest.mark.browser, pytest.mark.heavy]

SCREEN = 900
VIEWPORT = {"width": 1280, "height": SCREEN}
CHAPTER_SCREENS, CHAPTER_WORDS, PATH_SCREENS = 15, 2500, 120
NOT_CHAPTERS = {"index.md", "recipe.md", "glossary.md"}

MEASURE = r"""
() => {
  document.querySelectorAll('details').forEach(d => { d.open = false; });
  const article = document.querySelector('article') || document.body;
  const shown = el => {
    for (let e = el; e && e !== article; e = e.parentElement) {
      if (e.tagName === 'DETAILS' && !e.open && !el.closest('summary')) return false;
      const style = getComputedStyle(e);
      if (style.display === 'none' || style.visibility === 'hidden') return false;
    }
    return true;
  };
  const blocks = [...article.querySelectorAll('pre > code')].filter(shown).map(code => {
    const box = code.closest('div.highlight') || code.parentElement;
    const before = box.previousElementSibling;
    const links = before && before.tagName === 'P'
      ? [...before.querySelectorAll('a[href]')].map(a => a.href) : [];
    const kind = (box.className + ' ' + code.className).toLowerCase();
    return {
      text: code.innerText,
      height: box.getBoundingClientRect().height,
      // pymdownx.highlight names no language here: treat unnamed blocks as Python, and
      // let the parse decide (a shell line or printed output does not parse).
      python: /language-py/.test(kind) || !/language-/.test(kind),
      links,
    };
  });
  const prose = article.cloneNode(true);
  prose.querySelectorAll(
    'pre, details:not([open]) > :not(summary), script, style, .headerlink'
  ).forEach(e => e.remove());
  return {
    height: article.getBoundingClientRect().height,
    words: prose.innerText.split(/\s+/).filter(Boolean).length,
    blocks,
  };
}
"""


@dataclass(frozen=True)
class Measure:
    page: NavPage
    screens: float
    words: int
    blocks: list[dict]

    @property
    def test_blocks(self) -> list[dict]:
        return [b for b in self.blocks if is_test_code(b["text"])]


def is_test_code(text: str) -> bool:
    asserts = len(re.findall(r"^\s*assert\b", text, re.M))
    return "pytest" in text or "MonkeyPatch" in text or asserts >= 3


def reading_path() -> list[NavPage]:
    evidence = {
        src
        for item in mkdocs_config()["nav"]
        if isinstance(item, dict) and "Evidence" in item
        for src in item["Evidence"]
    }
    return [page for page in nav_pages() if page.src not in evidence]


@pytest.fixture(scope="module")
def measures(browser, site: BuiltSite) -> dict[str, Measure]:
    found = {}
    context = browser.new_context(viewport=VIEWPORT)
    tab = context.new_page()
    for page in nav_pages():  # the evidence pages too: their shown blocks must paste
        tab.goto((site.root / page.url).as_uri())
        m = tab.evaluate(MEASURE)
        found[page.src] = Measure(page, m["height"] / SCREEN, m["words"], m["blocks"])
    context.close()
    return found


def in_repository(link: str, site: BuiltSite, page: NavPage) -> bool:
    """A link that leads to a file of the repository: the site's served copy under source/
    or, when the site was built with a repository address, that address's file."""
    repository = (mkdocs_config().get("extra") or {}).get("repository")
    if isinstance(repository, str) and link.startswith(repository.rstrip("/") + "/blob/"):
        path = link.split("/blob/", 1)[1].split("/", 1)[1].split("#")[0]
        return (ROOT / path).is_file()
    target = Path(unquote(urljoin((site.root / page.url).as_uri(), link)).removeprefix("file://"))
    served = site.root / "source"
    return served in target.parents and (ROOT / target.relative_to(served)).is_file()


def undefined_names(texts: list[str], folder: Path) -> dict[int, list[str]]:
    """ruff's F821 on each block that parses as Python, by block index."""
    files = {}
    for i, text in enumerate(texts):
        try:
            ast.parse(text)
        except SyntaxError:
            continue  # shell lines or printed output shown in a python block
        files[i] = folder / f"block_{i}.py"
        files[i].write_text(text)
    if not files:
        return {}
    ruff = Path(sys.executable).parent / "ruff"
    done = subprocess.run(
        [str(ruff), "check", "--isolated", "--no-cache", "--select", "F821",
         "--output-format", "json", *map(str, files.values())],
        capture_output=True, text=True,
    )  # fmt: skip
    found: dict[int, list[str]] = {}
    index = {str(path): i for i, path in files.items()}
    for problem in json.loads(done.stdout or "[]"):
        name = re.search(r"`([^`]+)`", problem["message"])
        found.setdefault(index[problem["filename"]], []).append(name[1] if name else "?")
    return found


def test_the_reading_path_holds_the_pages_it_should():
    sources = [page.src for page in reading_path()]
    assert sources[:2] == ["index.md", "recipe.md"] and "claims.md" not in sources


@pytest.mark.parametrize(
    "page", [p for p in reading_path() if p.src not in NOT_CHAPTERS], ids=lambda p: p.src
)
def test_a_chapter_page_is_at_most_15_screens_and_2500_words(measures, page: NavPage):
    m = measures[page.src]
    assert m.screens <= CHAPTER_SCREENS, f"{page.src}: {m.screens:.1f} screens"
    assert m.words <= CHAPTER_WORDS, f"{page.src}: {m.words} words of visible prose"


def test_the_whole_reading_path_is_at_most_120_screens(measures):
    path = {page.src for page in reading_path()}
    total = sum(m.screens for m in measures.values() if m.page.src in path)
    tallest = sorted(
        (m for m in measures.values() if m.page.src in path), key=lambda m: -m.screens
    )[:3]
    assert total <= PATH_SCREENS, f"{total:.1f} screens; tallest: " + ", ".join(
        f"{m.page.src} {m.screens:.1f}" for m in tallest
    )


@pytest.mark.parametrize("page", reading_path(), ids=lambda p: p.src)
def test_at_most_one_visible_block_in_five_is_test_code(measures, page: NavPage):
    m = measures[page.src]
    assert 5 * len(m.test_blocks) <= len(m.blocks), (
        f"{page.src}: {len(m.test_blocks)} of {len(m.blocks)} visible blocks are test code; "
        'fold them: ??? success "Proof: ..."'
    )


@pytest.mark.parametrize("page", reading_path(), ids=lambda p: p.src)
def test_no_visible_block_is_taller_than_two_screens(measures, page: NavPage):
    tall = [
        f"block {i} ({b['height'] / SCREEN:.1f} screens): {b['text'][:60]!r}"
        for i, b in enumerate(measures[page.src].blocks)
        if b["height"] > 2 * SCREEN
    ]
    assert not tall, f"{page.src}: " + "; ".join(tall)


@pytest.mark.parametrize("page", nav_pages(), ids=lambda p: p.src)
def test_every_visible_python_block_pastes_or_links_its_whole_file(
    measures, page: NavPage, site: BuiltSite, tmp_path: Path
):
    blocks = [b for b in measures[page.src].blocks if b["python"]]
    excerpts = [any(in_repository(link, site, page) for link in b["links"]) for b in blocks]
    pasted = [b["text"] for b, excerpt in zip(blocks, excerpts, strict=True) if not excerpt]
    undefined = undefined_names(pasted, tmp_path)
    assert not undefined, f"{page.src}: " + "; ".join(
        f"block {i} uses {', '.join(sorted(set(names)))} undefined ({pasted[i][:50]!r}); "
        "import them in the block, or say it is an excerpt and link its file, [...](repo:PATH)"
        for i, names in undefined.items()
    )
