"""`make test`'s one look at the site in a browser, so that a broken theme or build fails in the
inner loop: one page of the session's build, served under its sub-path as GitHub Pages serves
it, loads in Chromium styled and with nothing wrong, and axe-core finds no rule broken in the
scheme it opens in (light).

The rest of tests/browser (every page in both schemes, screenshots, the site from disk and at
the root, the Tab walks, search) is `make test-all`'s: those modules are marked `heavy`
(page_fences/tiers.py).
"""

from __future__ import annotations

from collections.abc import Iterator

import browser_axe
import pytest
from browser_reading import VIEWPORT
from browser_tab import Stop, Tab, is_styled

pytestmark = pytest.mark.browser

# The front page: a table, math, links in text and in a table, the nav and the search box.
PAGE = "index.html"


@pytest.fixture(scope="module")
def smoke(browser, subpath_url: str) -> Iterator[tuple[Tab, Stop]]:
    tab = Tab.open_in(browser, subpath_url, viewport=VIEWPORT)
    yield tab, tab.visit(PAGE)
    tab.close()


def test_a_page_loads_styled_with_nothing_wrong(smoke: tuple[Tab, Stop]):
    _, stop = smoke
    assert stop.status == 200
    assert not stop.problems, f"{PAGE}:\n" + "\n".join(stop.problems)
    assert is_styled(stop.facts), f"{PAGE}: the theme's stylesheet did not apply"
    assert stop.facts["navigation"], f"{PAGE}: no nav"


def test_the_page_breaks_no_axe_core_rule(smoke: tuple[Tab, Stop]):
    tab, _ = smoke
    browser_axe.start(tab.page, every_rule=True)
    violations = browser_axe.result(tab.page)
    assert not violations, browser_axe.describe(f"{PAGE} (light scheme)", violations)
