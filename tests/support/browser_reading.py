"""The site read once, under its sub-path as GitHub Pages serves it, as a book: from the first
page by the "Next" links, every page looked at in full before moving on.

At each page, in this order: the facts a visit records (Tab.stop: errors, requests, title, TOC,
math, links); axe-core with every rule in the scheme the page opened in; the light/dark toggle,
then axe-core's colour rules in the other scheme; a screenshot; then every code block copied
with its button (which opens collapsed blocks, so it comes after the audit). The site remembers
the scheme, so the pages open alternately light and dark.

One reading serves tests/browser/test_pages.py, test_published.py and test_accessibility.py
(under xdist, tests/browser runs in one worker: xdist_scheduling.py). Rendering a page is most
of what a browser test costs, so each page is rendered once for all three, where the site used
to be read at the root, under the sub-path, and again for the audit.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import browser_axe
from browser_palette import scheme, toggle
from browser_site import nav_pages
from browser_tab import Book, Stop, Tab

NAV = nav_pages()
KEEP_SCREENSHOTS = bool(os.environ.get("SCREENSHOT_DIR"))
VIEWPORT = {"width": 1280, "height": 900}


@dataclass(frozen=True)
class Look:
    """What the reading found at one page, besides its facts."""

    screenshot: Path
    copies: list[dict]  # [{shown, copied, clicked?}] per code block, in page order
    violations: dict[str, list[dict]]  # axe-core's, by scheme ("light", "dark")


def audit_both_schemes(tab: Tab) -> dict[str, list[dict]]:
    """axe-core's violations: every rule in the scheme the page shows, then (after the toggle)
    the rules that depend on colour in the other; the markup, and so every other rule's
    finding, does not change with the scheme."""
    found = {}
    for every_rule in (True, False):
        if not every_rule:
            toggle(tab)
        browser_axe.start(tab.page, every_rule=every_rule)
        found[scheme(tab)] = browser_axe.result(tab.page)
    return found


class Reading(Book):
    def __init__(self, tab: Tab, screenshot_dir: Path) -> None:
        self.screenshot_dir = screenshot_dir
        self.clicked = False  # a copy button clicked with the mouse yet (once is enough)
        super().__init__(tab, NAV[0].url, self.look)

    def look(self, tab: Tab) -> Look:
        violations = audit_both_schemes(tab)
        number = next((n for n, p in enumerate(NAV, 1) if p.url == tab.path), 0)
        name = tab.path.removesuffix(".html").replace("/", "_")
        shot = self.screenshot_dir / f"{number:02d}-{name}.png"
        # Whole pages (slow) when kept, as CI keeps them; otherwise what a reader first sees.
        # A whole long page takes seconds to capture on a loaded machine; the picture is an
        # artefact, not a check, so it gets more time than the 10 s every check has.
        tab.page.screenshot(path=shot, full_page=KEEP_SCREENSHOTS, timeout=120_000)
        copies = tab.copy_every_block(as_a_reader=not self.clicked)
        self.clicked = self.clicked or any(c.get("clicked") for c in copies)
        return Look(shot, copies, violations)

    def look_at(self, url: str) -> tuple[Stop, Look]:
        """The stop at `url` (a page the links miss, such as 404.html, is opened now)."""
        stop = self(url)
        return stop, stop.extra
