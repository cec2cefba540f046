"""Folded proofs and solutions, opened: every page of the nav audited by axe-core with every
<details> open, in the light scheme with every rule and in the dark scheme with the colour rules
(the markup does not change with the scheme). The session's one reading audits the pages as they
open, folds closed; this module audits what a reader sees after opening them."""

from __future__ import annotations

import browser_axe
import pytest
from browser_site import nav_pages
from built_site import BuiltSite

pytestmark = [pytest.mark.browser, pytest.mark.heavy]

OPEN_ALL = "() => document.querySelectorAll('details').forEach(d => { d.open = true; })"


@pytest.fixture(scope="module", params=["light", "dark"])
def scheme_tab(request, browser):
    context = browser.new_context(
        viewport={"width": 1280, "height": 900}, color_scheme=request.param
    )
    yield request.param, context.new_page()
    context.close()


@pytest.mark.parametrize("page", nav_pages(), ids=lambda p: p.src)
def test_a_page_with_every_fold_open_passes_axe_core(scheme_tab, site: BuiltSite, page):
    scheme, tab = scheme_tab
    tab.goto((site.root / page.url).as_uri())
    opened = tab.evaluate(OPEN_ALL + " || document.querySelectorAll('details[open]').length")
    browser_axe.start(tab, every_rule=scheme == "light")
    violations = browser_axe.result(tab)
    where = f"{page.url} ({scheme} scheme, {opened} folds open)"
    assert not violations, browser_axe.describe(where, violations)


def test_a_link_to_a_folded_proof_opens_its_fold(browser, site: BuiltSite):
    """Claims and proofs links to each proof block by its id; a proof inside a fold must show
    when the link is followed (Chromium opens the <details> around a fragment's target)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    tab.goto((site.root / "claims.html").as_uri())
    links = tab.evaluate(
        "() => [...document.querySelectorAll('article a[href*=\"#\"]')].map(a => a.href)"
    )
    folded = []
    for link in dict.fromkeys(links):
        page, _, target = link.partition("#")
        if not target or page.endswith("claims.html"):
            continue
        tab.goto(link)
        state = tab.evaluate(
            """(id) => { const e = document.getElementById(id);
                         const d = e && e.closest('details');
                         return e ? (d ? (d.open ? 'open' : 'closed') : 'none') : 'missing'; }""",
            target,
        )
        assert state != "closed", f"{link}: the fold around the proof stays closed"
        folded.append(state)
        if folded.count("open") >= 5:
            break
    context.close()
    assert "open" in folded, "no link from Claims and proofs leads into a fold"
