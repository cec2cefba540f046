"""The site as a reader meets it: built once, served on 127.0.0.1, opened in headless Chromium.

Chromium is Debian's (`apt-get install chromium`, at /usr/bin/chromium; CHROMIUM_PATH points
elsewhere), never a browser downloaded by a test tool. Without it these tests skip and say why,
unless REQUIRE_BROWSER=1 (set by .ci/run), where they fail instead.

Screenshots of every page go to $SCREENSHOT_DIR (default: a pytest temporary folder).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import browser_axe
import pytest
from browser_reading import VIEWPORT, Reading
from browser_site import SUBPATH, serve
from browser_tab import Tab
from built_site import BuiltSite

CHROMIUM = Path(os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium"))
# Headless, and quiet on the network: no background requests to Google's hosts.
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    # Belt and braces: no host name resolves, so nothing can reach another host even if a
    # request escaped the tab's interception.
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
]


@pytest.fixture(scope="session")
def chromium() -> Path:
    missing = None
    if not (CHROMIUM.is_file() and os.access(CHROMIUM, os.X_OK)):
        missing = (
            f"no Chromium at {CHROMIUM}: install Debian's with "
            "`sudo apt-get install chromium` (.ci/run does)"
        )
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            missing = "the playwright package is missing: `make setup` installs requirements.txt"
    if missing:
        if os.environ.get("REQUIRE_BROWSER") == "1":
            pytest.fail(f"REQUIRE_BROWSER=1 but {missing}", pytrace=False)
        pytest.skip(missing)
    return CHROMIUM


@pytest.fixture(scope="session")
def browser(chromium: Path):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(chromium), args=FLAGS)
        yield browser
        browser.close()


@pytest.fixture(scope="session")
def published(chromium: Path, site: BuiltSite) -> BuiltSite:
    """The session's one build (made as the workflow makes it for GitHub Pages)."""
    return site


@pytest.fixture(scope="session")
def root_url(published: BuiltSite) -> Iterator[str]:
    with serve(published.root) as url:
        yield url


@pytest.fixture(scope="session")
def subpath_url(published: BuiltSite) -> Iterator[str]:
    with serve(published.root, SUBPATH) as url:
        yield url


@pytest.fixture(scope="session")
def disk_url(published: BuiltSite) -> str:
    return published.root.as_uri() + "/"


@pytest.fixture(scope="session")
def screenshot_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = os.environ.get("SCREENSHOT_DIR")
    if not folder:
        return tmp_path_factory.mktemp("screenshots")
    path = Path(folder).resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def _tab(browser, base: str, **options) -> Iterator[Tab]:
    tab = Tab.open_in(browser, base, **options)
    yield tab
    tab.close()


@pytest.fixture(scope="session")
def served(browser, root_url: str) -> Iterator[Tab]:
    """A tab on the site served at the root of 127.0.0.1:PORT (the search tests')."""
    yield from _tab(browser, root_url)


@pytest.fixture(scope="session")
def under_subpath(browser, subpath_url: str) -> Iterator[Tab]:
    yield from _tab(browser, subpath_url)


@pytest.fixture(scope="session")
def from_disk(browser, disk_url: str) -> Iterator[Tab]:
    yield from _tab(browser, disk_url)


@pytest.fixture(scope="session")
def reading(browser, subpath_url: str, screenshot_dir: Path) -> Iterator[Reading]:
    """The site read once under the sub-path, every page looked at in full (browser_reading.py);
    the tab may use the clipboard, and axe-core is loaded into every page it opens."""
    for tab in _tab(
        browser, subpath_url, viewport=VIEWPORT, permissions=["clipboard-read", "clipboard-write"]
    ):
        tab.page.context.add_init_script(script=browser_axe.source())
        yield Reading(tab, screenshot_dir)


@pytest.fixture
def fresh_tab(browser, root_url: str) -> Iterator[Tab]:
    """A tab of its own, for a test that changes what the site remembers (the palette)."""
    yield from _tab(browser, root_url)
