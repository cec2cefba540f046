"""The site's two colour schemes, and switching between them as a reader does."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from browser_tab import Tab

# The browser's colour scheme -> the theme's scheme it selects.
SCHEMES = {"light": "default", "dark": "slate"}
NAMED = {theme: name for name, theme in SCHEMES.items()}
SHOWN = "document.body.dataset.mdColorScheme"
SETTLED = """() => Promise.race([
  Promise.all(document.getAnimations().map((a) => a.finished.catch(() => null))),
  new Promise((resolve) => setTimeout(resolve, 1000)),
])"""
# A check of colours needs the page as it ends up, not its transitions: with none, a switch of
# scheme is drawn at once.
STILL = "*, *::before, *::after { transition: none !important; animation: none !important }"


def scheme(tab: Tab) -> str:
    """ "light" or "dark": the scheme the page shows."""
    return NAMED[tab.page.evaluate(SHOWN)]


def toggle(tab: Tab) -> None:
    """Switch the scheme with the toggle in the header; wait till it shows. The site remembers
    the choice: the next page opens in it."""
    tab.page.add_style_tag(content=STILL)
    before = tab.page.evaluate(SHOWN)
    tab.page.locator('[data-md-component="palette"] label:visible').click()
    tab.page.wait_for_function(f"{SHOWN} !== {before!r}")
    tab.page.evaluate(SETTLED)
