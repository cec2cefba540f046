"""Search finds a term and takes the reader to the page that explains it, served or from disk."""

from __future__ import annotations

import pytest
from browser_site import NavPage, distinctive_word, nav_pages
from browser_tab import Tab, site_path
from built_site import BuiltSite

# make test-all's; make test looks at one page only (test_smoke.py)
pytestmark = [pytest.mark.browser, pytest.mark.heavy]

NAV = nav_pages()
BY_SOURCE = {p.src: p for p in NAV}
# The term a reader searches for, and the page that must be among the results and explain it.
SEARCHES = {
    "weights_only": BY_SOURCE["serialization.md"],
    "set_to_none": BY_SOURCE["zero-grad.md"],
}
WHERE = ["served", "from_disk"]


def search_and_land(tab: Tab, term: str, target: NavPage, start: NavPage) -> None:
    tab.open(start.url)
    results = tab.search(term)
    pages = list(dict.fromkeys(site_path(url, tab.base) for url in results))
    assert target.url in pages, f"searching {term!r} finds {pages}, not {target.url}"
    links = tab.page.locator(".md-search-result__link")
    first = next(
        (
            n
            for n, url in enumerate(results)
            if site_path(url, tab.base) == target.url and links.nth(n).is_visible()
        ),
        None,
    )
    assert first is not None, f"no result for {target.url} that a reader can click"
    tab.follow(links.nth(first))
    assert tab.path == target.url
    assert term.lower() in tab.page.inner_text("article").lower()
    assert not tab.problems()


# From disk, search runs on the index the offline plugin inlines; one term proves it there.
CASES = [("served", "weights_only"), ("served", "set_to_none"), ("from_disk", "weights_only")]


@pytest.mark.parametrize(("where", "term"), CASES)
def test_search_lands_on_the_page_that_explains_the_term(request, where: str, term: str):
    target = SEARCHES[term]
    start = NAV[-1] if target != NAV[-1] else NAV[0]
    search_and_land(request.getfixturevalue(where), term, target, start)


@pytest.mark.parametrize("where", WHERE)
def test_search_finds_a_word_only_one_page_has(request, published: BuiltSite, where: str):
    """The search machinery itself, whatever the pages say: a word unique to a page finds it."""
    for target in reversed(NAV):
        word = distinctive_word(published.root, target)
        if word:
            break
    else:
        pytest.fail("no page has a word that no other page has")
    start = NAV[0] if target != NAV[0] else NAV[-1]
    search_and_land(request.getfixturevalue(where), word, target, start)
