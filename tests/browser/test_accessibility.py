"""Readable by everyone: axe-core's WCAG 2.1 A/AA rules on every page in both colour schemes,
and the keyboard alone can reach, see and use everything.

Every built page (the nav's and the 404 page) is audited in the session's one reading of the
site under its sub-path, as GitHub Pages serves it (browser_reading.py): in the scheme it opens
in, then switched with the site's own light/dark toggle and audited again with the rules that
depend on colour (the markup, and so every other rule's finding, does not change). Any rule
axe-core finds broken fails, with the page, the scheme, the rule and the elements.
"""

from __future__ import annotations

import contextlib
import html
import re
from collections.abc import Iterator

import browser_axe
import pytest
from browser_focus import FOCUS, problem
from browser_palette import SCHEMES, SETTLED, SHOWN, toggle
from browser_palette import scheme as scheme_of
from browser_reading import VIEWPORT, Reading
from browser_site import nav_pages
from browser_tab import Tab
from built_site import BuiltSite

# make test-all's; make test looks at one page only (test_smoke.py)
pytestmark = [pytest.mark.browser, pytest.mark.heavy]

PAGES = [p.url for p in nav_pages()] + ["404.html"]
# A page with code blocks, links in text and in a table, heading anchors, folded proofs.
WALKED = "safetensors.html"
# A page whose tables scroll sideways in the reading (not folded): the benchmark tables.
SCROLLING = "performance.html"
# The search answers keys once its index is loaded ("Initializing search" until then).
SEARCH_READY = """() => !/^Initializing/.test(
  document.querySelector(".md-search-result__meta").textContent.trim())"""


@pytest.fixture(scope="module")
def audit(reading: Reading) -> dict[tuple[str, str], list[dict]]:
    """axe-core's violations for each (page, scheme), from the reading."""
    found = {
        (url, scheme): violations
        for url in PAGES
        for scheme, violations in reading.look_at(url)[1].violations.items()
    }
    assert set(found) == {(url, scheme) for url in PAGES for scheme in SCHEMES}
    return found


@pytest.fixture(scope="module")
def keyboard(browser, root_url: str) -> Iterator[dict[str, Tab]]:
    """A tab per scheme for the keyboard, allowed to use the clipboard."""
    tabs = {
        name: Tab.open_in(
            browser,
            root_url,
            color_scheme=name,
            viewport=VIEWPORT,
            permissions=["clipboard-read", "clipboard-write"],
        )
        for name in SCHEMES
    }
    yield tabs
    for tab in tabs.values():
        tab.close()


def test_axe_core_is_the_pinned_version(audit, reading: Reading):
    version = reading.tab.page.evaluate("axe.version")
    assert version == browser_axe.pinned_version()


def test_the_audit_would_catch_grey_text_and_grey_code(audit, reading: Reading):
    """The checks themselves: pale text in the page and a pale comment colour are reported."""
    tab = reading.tab  # the reading is over (`audit`): the tab is free
    tab.open(WALKED)
    if scheme_of(tab) != "light":
        toggle(tab)
    tab.page.add_style_tag(
        content="article p:first-of-type { color: #aaa !important }"
        " .highlight .c1 { color: #ccc !important }"
    )
    browser_axe.start(tab.page, every_rule=False)
    found = {v["rule"]: v for v in browser_axe.result(tab.page)}
    assert "color-contrast" in found, list(found)
    code = found.get("color-contrast (code tokens, checked here)")
    assert code and "#cccccc on #f5f5f5" in code["nodes"][0]["summary"], list(found)


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("url", PAGES)
def test_page_breaks_no_axe_core_rule(audit, url: str, scheme: str):
    violations = audit[url, scheme]
    assert not violations, browser_axe.describe(f"{url} ({scheme} scheme)", violations)


# --- the keyboard alone -------------------------------------------------------------------


def walk(tab: Tab, url: str, limit: int = 250) -> list[dict]:
    """Press Tab from the top of the page until focus leaves the page; each stop, described."""
    tab.open(url)
    stops = []
    for _ in range(limit):
        tab.page.keyboard.press("Tab")
        stop = tab.page.evaluate(FOCUS)
        if stop["left"]:
            return stops
        stops.append(stop)
    raise AssertionError(f"{url}: focus never left the page after {limit} presses of Tab")


@pytest.mark.parametrize("scheme", SCHEMES)
def test_tab_walks_the_page_and_focus_is_always_visible(keyboard: dict[str, Tab], scheme: str):
    stops = walk(keyboard[scheme], WALKED)
    unseen = [
        f"stop {n}: {s['element']} {problem(s)}" for n, s in enumerate(stops, 1) if problem(s)
    ]
    assert not unseen, f"{WALKED} ({scheme}), focus a reader cannot see:\n" + "\n".join(unseen)
    assert stops[0]["skip"], f"the first Tab stop is {stops[0]['element']}, not the skip link"
    assert any(s["copy"] for s in stops), "no code block's copy button is reached by Tab"
    reached = " ".join(s["element"] for s in stops)
    assert "md-search__input" in reached, "the search box is not reached"


def test_tab_reaches_a_table_that_scrolls_sideways_and_shows_it(keyboard: dict[str, Tab]):
    tab = keyboard["light"]
    tab.open(SCROLLING)
    for _ in range(400):
        tab.page.keyboard.press("Tab")
        stop = tab.page.evaluate(FOCUS)
        if stop["left"]:
            break
        if "md-typeset__scrollwrap" in stop["element"]:
            assert not problem(stop), f"{SCROLLING}: {stop['element']} {problem(stop)}"
            return
    pytest.fail(f"Tab never reaches a table that scrolls sideways on {SCROLLING}")


def test_the_walk_would_catch_a_missing_or_faint_focus_ring(keyboard: dict[str, Tab]):
    tab = keyboard["light"]
    tab.open(WALKED)
    tab.page.keyboard.press("Tab")
    tab.page.keyboard.press("Tab")  # the site's name, a link in the header
    tab.page.add_style_tag(content="*:focus-visible { outline: none !important }")
    assert "no focus ring" in (problem(tab.page.evaluate(FOCUS)) or "")
    tab.page.add_style_tag(content="*:focus-visible { outline: 2px solid #bf360c !important }")
    assert "against its background" in (problem(tab.page.evaluate(FOCUS)) or "")


def test_the_skip_link_jumps_to_the_content(keyboard: dict[str, Tab]):
    tab = keyboard["light"]
    tab.open(WALKED)
    tab.page.keyboard.press("Tab")
    target = tab.page.eval_on_selector(".md-skip", "a => a.getAttribute('href')")
    tab.page.keyboard.press("Enter")
    tab.page.wait_for_function("(hash) => location.hash === hash", arg=target)
    tab.page.keyboard.press("Tab")
    assert tab.page.evaluate("!!document.activeElement.closest('article')"), (
        "after the skip link, Tab does not go on in the page's text"
    )


def test_search_opens_and_closes_with_the_keyboard(keyboard: dict[str, Tab]):
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    tab = keyboard["light"]
    page = tab.page
    tab.open(WALKED)
    is_open = "document.getElementById('__search').checked"
    page.wait_for_function(SEARCH_READY)
    page.keyboard.press("/")
    try:
        page.wait_for_function(is_open, timeout=3000)
    except PlaywrightTimeout:
        pytest.fail("/ does not open the search")
    assert page.evaluate("document.activeElement.matches('.md-search__input')")
    page.keyboard.type("weights_only")
    page.wait_for_selector(".md-search-result__link")
    page.keyboard.press("ArrowDown")
    assert page.evaluate("document.activeElement.matches('.md-search-result__link')"), (
        "the arrow keys do not move to the results"
    )
    page.keyboard.press("Escape")
    page.wait_for_function(f"!{is_open}")
    # Focus may take a frame or two to leave the closed search; then it must be seen, or gone.
    settled = """() => {
      const active = document.activeElement;
      return active === document.body || active.checkVisibility({visibilityProperty: true});
    }"""
    with contextlib.suppress(PlaywrightTimeout):
        page.wait_for_function(settled, timeout=2000)
    left_on = page.evaluate(FOCUS)
    assert left_on["left"] or not problem(left_on), f"after Escape, focus is on {left_on}"
    assert not tab.problems()


@pytest.mark.parametrize("scheme", SCHEMES)
def test_the_open_search_breaks_no_axe_core_rule(keyboard: dict[str, Tab], scheme: str):
    """The search dialog with its results, which the page audit never sees open."""
    page = keyboard[scheme].page
    keyboard[scheme].open(WALKED)
    page.wait_for_function(SEARCH_READY)
    page.keyboard.press("/")
    page.keyboard.type("weights_only")
    page.wait_for_selector(".md-search-result__link")
    page.evaluate(SETTLED)
    # As for the pages: every rule in one scheme, the colour rules in the other.
    browser_axe.start(page, every_rule=scheme == "light")
    violations = browser_axe.result(page)
    where = f"{WALKED} with the search open ({scheme} scheme)"
    assert not violations, browser_axe.describe(where, violations)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_the_light_dark_toggle_works_from_the_keyboard(keyboard: dict[str, Tab], scheme: str):
    tab = keyboard[scheme]
    tab.open(WALKED)
    for _ in range(10):
        tab.page.keyboard.press("Tab")
        if tab.page.evaluate("document.activeElement.matches('.md-option')"):
            break
    else:
        pytest.fail("Tab never reaches the light/dark toggle")
    tab.page.keyboard.press("Enter")
    other = next(name for name in SCHEMES if name != scheme)
    tab.page.wait_for_function(f"{SHOWN} === {SCHEMES[other]!r}")
    # Back as it was, for the tests that follow (the choice is remembered).
    tab.page.keyboard.press("Enter")
    tab.page.wait_for_function(f"{SHOWN} === {SCHEMES[scheme]!r}")


def test_a_code_block_is_copied_with_the_keyboard(keyboard: dict[str, Tab]):
    tab = keyboard["light"]
    page = tab.page
    tab.open(WALKED)
    for _ in range(250):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.dataset.mdType === 'copy'"):
            break
    else:
        pytest.fail(f"Tab never reaches a copy button on {WALKED}")
    code = page.evaluate(
        "document.querySelector(document.activeElement.dataset.clipboardTarget).textContent"
    )
    page.evaluate("navigator.clipboard.writeText('')")
    page.keyboard.press("Enter")
    assert tab.read_clipboard().rstrip("\n") == code.rstrip("\n")


# --- pictures -----------------------------------------------------------------------------

IMG = re.compile(r"<img\b[^>]*>", re.S)
ALT = re.compile(r'\balt="([^"]*)"')


def test_every_picture_says_what_it_shows(published: BuiltSite):
    """A plot's text alternative is a sentence about what it shows, not a file name."""
    pictures = 0
    for path in published.pages():
        for tag in IMG.findall(path.read_text("utf8")):
            if 'class="twemoji' in tag:
                continue
            pictures += 1
            alt = html.unescape((ALT.search(tag) or [None, ""])[1]).strip()
            where = f"{path.relative_to(published.root)}: {tag[:120]}"
            assert len(alt.split()) >= 6, f"{where}: alt text too short to say what it shows"
            assert not re.search(r"\.(png|svg|jpe?g)\b", alt), f"{where}: alt text is a file name"
    assert pictures >= 2, "the lab's curves and the format benchmark should be on the site"
