"""The site where readers find it: under /<repository>/ as GitHub Pages serves it, and from disk.

Each is read once as a book, from the first page by the "Next" links: under the sub-path, the
session's one reading (browser_reading.py, shared with test_pages and test_accessibility).
"""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from browser_reading import Reading
from browser_site import SUBPATH, NavPage, nav_pages
from browser_tab import Book, Tab, is_styled, site_path

# make test-all's; make test looks at one page only (test_smoke.py)
pytestmark = [pytest.mark.browser, pytest.mark.heavy]

NAV = nav_pages()
IDS = [p.url for p in NAV]
# What Chromium logs for a page that answers 404; a missing asset is reported by its URL too.
DOCUMENT_404 = "Failed to load resource: the server responded with a status of 404"
_fetched: dict[str, int] = {}


def status_of(url: str) -> int:
    if url not in _fetched:
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                _fetched[url] = response.status
        except urllib.error.HTTPError as err:
            _fetched[url] = err.code
    return _fetched[url]


# --- under a sub-path -----------------------------------------------------------------------


@pytest.mark.parametrize("page", NAV, ids=IDS)
def test_page_works_under_the_sub_path(reading: Reading, page: NavPage):
    stop = reading(page.url)
    assert stop.status == 200
    assert not stop.problems, "\n".join(stop.problems)
    assert is_styled(stop.facts), f"/{SUBPATH}/{page.url}: the theme's stylesheet did not apply"
    base = reading.tab.base
    origin = base.removesuffix(f"{SUBPATH}/")
    local = {u.partition("#")[0] for u in stop.facts["links"] if u.startswith(origin)}
    outside = sorted(u for u in local if not u.startswith(base))
    assert not outside, f"links that leave /{SUBPATH}/: {outside}"
    dead = sorted(u for u in local if status_of(u) != 200)
    assert not dead, f"links that lead nowhere under /{SUBPATH}/: {dead}"


def test_next_links_walk_the_nav_under_the_sub_path(reading: Reading):
    assert reading.order == IDS


def test_the_sub_path_itself_opens_the_first_page(reading: Reading, under_subpath: Tab):
    first = reading(NAV[0].url).facts["title"]
    for url in (under_subpath.base, under_subpath.base.rstrip("/")):
        response = under_subpath.page.goto(url)
        assert response.status == 200, url
        assert under_subpath.page.title() == first, url


@pytest.mark.parametrize("missing", ["no-such-page.html", "deep/in/no/such/folder/"])
def test_a_missing_page_shows_the_styled_404_page(
    under_subpath: Tab, screenshot_dir: Path, missing: str
):
    stop = under_subpath.visit(missing)
    assert stop.status == 404
    assert "404" in stop.facts["h1"], stop.facts["h1"]
    assert is_styled(stop.facts), "the 404 page is shown without the site's styles"
    # The page itself answers 404, as GitHub Pages does; nothing else may fail.
    expected = (f"{under_subpath.base}{missing}: HTTP 404", f"console: {DOCUMENT_404}")
    unexpected = [p for p in stop.problems if not p.startswith(expected)]
    assert not unexpected, "\n".join(unexpected)
    nav = {site_path(u, under_subpath.base) for u in stop.facts["navigation"]}
    assert nav >= set(IDS), "the 404 page's nav does not lead back into the site"
    if missing == "no-such-page.html":
        under_subpath.page.screenshot(path=screenshot_dir / "404.png", full_page=True)


# --- from disk ------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def on_disk(from_disk: Tab) -> Book:
    return Book(from_disk, NAV[0].url)


@pytest.mark.parametrize("page", NAV, ids=IDS)
def test_page_works_opened_from_disk(on_disk: Book, page: NavPage):
    stop = on_disk(page.url)
    assert not stop.problems, "\n".join(stop.problems)
    assert is_styled(stop.facts), f"{page.url} from disk: the theme's stylesheet did not apply"
    files = {u.partition("#")[0].partition("?")[0] for u in stop.facts["links"]}
    files = {u for u in files if u.startswith("file:")}
    missing = sorted(u for u in files if not Path(unquote(urlsplit(u).path)).is_file())
    assert not missing, f"links that lead to no file (a folder is not a page from disk): {missing}"
    served = [u for u in stop.facts["links"] if u.startswith("http://127.0.0.1")]
    assert not served, f"links that need a server: {served}"


def test_next_links_walk_the_nav_from_disk(on_disk: Book):
    assert on_disk.order == IDS
