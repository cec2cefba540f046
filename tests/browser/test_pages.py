"""Every page in the nav, read in Chromium as a reader reads it: the session's one reading of the
site under its sub-path (browser_reading.py, shared with test_published and test_accessibility)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from browser_reading import Reading
from browser_site import NavPage, front_matter, has_math, mkdocs_config, nav_pages
from browser_tab import Tab, is_styled, site_path

# make test-all's; make test looks at one page only (test_smoke.py)
pytestmark = [pytest.mark.browser, pytest.mark.heavy]

NAV = nav_pages()
SITE_NAME = mkdocs_config()["site_name"]
SITE_DESCRIPTION = " ".join(mkdocs_config().get("site_description", "").split())
RAW_MATH = re.compile(r"\\\(|\\\[")


@pytest.mark.parametrize("page", NAV, ids=[p.url for p in NAV])
def test_page_loads_with_no_error_and_nothing_from_another_host(reading: Reading, page: NavPage):
    stop, look = reading.look_at(page.url)
    assert stop.status == 200
    assert not stop.problems, f"{page.url}:\n" + "\n".join(stop.problems)
    assert is_styled(stop.facts), f"{page.url}: the theme's stylesheet did not apply"
    assert look.screenshot.stat().st_size > 0


@pytest.mark.parametrize("page", NAV, ids=[p.url for p in NAV])
def test_math_is_rendered(reading: Reading, page: NavPage):
    facts = reading(page.url).facts
    prose = " ".join(facts["prose"].split())
    raw = [prose[max(0, m.start() - 40) : m.end() + 20] for m in RAW_MATH.finditer(prose)]
    assert not raw, f"{page.url}: raw math in the text a reader sees (the TOC too): {raw}"
    assert facts["unrendered"] == 0, f"{page.url}: math left for a script to render"
    if has_math(page):
        assert facts["math"], f"{page.src} writes math but {page.url} has no <math> element"
    drawn = [m for m in facts["math"] if m["visible"]]
    assert all(m["width"] > 0 for m in drawn), f"{page.url}: a formula is drawn with no width"


@pytest.mark.parametrize("page", NAV, ids=[p.url for p in NAV])
def test_the_table_of_contents_says_what_the_headings_say(reading: Reading, page: NavPage):
    """Headings with math or code are written out plainly in the TOC; the words must not change."""

    def squeezed(text: str) -> str:
        return "".join(text.split())

    wrong = [
        f"#{t['id']}: the TOC says {' '.join(t['entry'].split())!r}, "
        f"the heading {' '.join((t['heading'] or '(none)').split())!r}"
        for t in reading(page.url).facts["toc"]
        if t["heading"] is None or squeezed(t["entry"]) != squeezed(t["heading"])
    ]
    assert not wrong, f"{page.url}:\n" + "\n".join(dict.fromkeys(wrong))


@pytest.mark.parametrize("page", NAV, ids=[p.url for p in NAV])
def test_images_and_plots_load(reading: Reading, page: NavPage):
    broken = [i["src"] for i in reading(page.url).facts["images"] if not i["width"]]
    assert not broken, f"{page.url}: images that did not load: {broken}"


@pytest.mark.parametrize("page", NAV, ids=[p.url for p in NAV])
def test_title_and_description_come_from_the_page(reading: Reading, page: NavPage):
    facts, meta = reading(page.url).facts, front_matter(page)
    if meta.get("title"):
        assert facts["title"] == f"{meta['title']} - {SITE_NAME}"
    elif page.url != "index.html":  # Material titles the home page with the site's name alone
        assert facts["title"] == f"{page.title} - {SITE_NAME}"
    assert meta.get("description"), f"{page.src}: no `description:` in the front matter"
    assert facts["description"] == " ".join(str(meta["description"]).split())


def test_titles_and_descriptions_differ_from_page_to_page(reading: Reading):
    facts = {page.url: reading(page.url).facts for page in NAV}
    for key in ("title", "description"):
        owners: dict[str, list[str]] = {}
        for url, f in facts.items():
            owners.setdefault(f[key], []).append(url)
        shared = {value: urls for value, urls in owners.items() if len(urls) > 1}
        assert not shared, f"pages sharing a {key}: {shared}"
    generic = [url for url, f in facts.items() if f["description"] == SITE_DESCRIPTION]
    assert not generic, f"pages with the site's description, not their own: {generic}"


def test_next_links_walk_the_nav_in_reading_order(reading: Reading):
    assert reading.order == [p.url for p in NAV]


def test_the_nav_links_to_every_page(reading: Reading):
    links = {site_path(url, reading.tab.base) for url in reading(NAV[0].url).facts["navigation"]}
    assert [p.url for p in NAV if p.url not in links] == []


@pytest.mark.parametrize("page", NAV, ids=[p.url for p in NAV])
def test_copy_buttons_copy_exactly_the_code(reading: Reading, page: NavPage):
    copies = reading.look_at(page.url)[1].copies
    wrong = [
        f"block {n}: copied {c['copied']!r}, shows {c['shown']!r}"
        for n, c in enumerate(copies, 1)
        if c["shown"] is None or c["copied"] not in (c["shown"], c["shown"].removesuffix("\n"))
    ]
    assert not wrong, f"{page.url}:\n" + "\n".join(wrong)


def test_some_page_has_a_code_block_to_copy_with_the_mouse(reading: Reading):
    assert any(reading.look_at(page.url)[1].copies for page in NAV), "no copy button on any page"
    assert reading.clicked, "no copy button a reader can see and click"


def test_light_dark_toggle_switches_and_is_remembered(fresh_tab: Tab, screenshot_dir: Path):
    page = fresh_tab.page
    fresh_tab.open(NAV[0].url)

    def scheme() -> str:
        return page.locator("body").get_attribute("data-md-color-scheme")

    def background() -> str:
        return page.evaluate("getComputedStyle(document.body).backgroundColor")

    assert scheme() == "default"
    light = background()
    page.locator('[data-md-component="palette"] label:visible').click()
    page.wait_for_function("document.body.dataset.mdColorScheme === 'slate'")
    assert background() != light
    page.screenshot(path=screenshot_dir / "dark-mode.png")

    fresh_tab.open(NAV[-1].url)
    assert scheme() == "slate", "the choice is not remembered from page to page"
    page.locator('[data-md-component="palette"] label:visible').click()
    page.wait_for_function("document.body.dataset.mdColorScheme === 'default'")
    assert background() == light
    assert not fresh_tab.problems()


def test_a_request_to_another_host_would_be_caught_and_never_sent(fresh_tab: Tab):
    fresh_tab.open(NAV[0].url)
    outcome = fresh_tab.page.evaluate(
        """async () => {
          const img = document.createElement("img");
          img.src = "https://cdn.example/plot.png";
          document.body.append(img);
          await img.decode().catch(() => null);
          return fetch("http://scripts.example/x.js").then(() => "sent", () => "refused");
        }"""
    )
    assert outcome == "refused"
    assert fresh_tab.foreign == ["https://cdn.example/plot.png", "http://scripts.example/x.js"]
    assert any("ERR_BLOCKED_BY_CLIENT" in f for f in fresh_tab.failed), fresh_tab.failed
