"""One browser tab that notes everything a reader would not want to happen.

A Tab wraps a Playwright page in its own context and records, since the last `open()`:
console errors, uncaught exceptions, failed requests, responses with an error status, and any
request to another host, which is aborted before it leaves the machine.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page, Response

# Everything a page may load: this machine over HTTP, the page's own folder from disk,
# and what the browser makes itself. Anything else is another host.
LOCAL_URL = r"(?:(?:https?|wss?)://127\.0\.0\.1(?:[:/]|$)|file:|data:|blob:|about:)"
LOCAL = re.compile("^" + LOCAL_URL)
# Handed to the browser as a pattern, so that only other hosts' requests are intercepted.
FOREIGN = re.compile("^(?!" + LOCAL_URL + ")")
# What a page cancels when the reader moves on (a search index still loading, say).
# It is not an error; a blocked request (ERR_BLOCKED_BY_CLIENT) or a missing file still is.
CANCELLED = "net::ERR_ABORTED"

# Facts about the page as loaded: read in the page, after its images have been decoded.
PAGE_FACTS = """async () => {
  await Promise.all([...document.images].map((img) => {
    img.loading = "eager";
    return img.decode().catch(() => null);
  }));
  const skip = "pre, code, script, style, math, textarea, kbd, samp, .md-search";
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const prose = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (!node.parentElement.closest(skip)) prose.push(node.data);
  }
  const meta = document.querySelector('meta[name="description"]');
  const header = document.querySelector(".md-header");
  return {
    title: document.title,
    description: meta ? meta.content : null,
    prose: prose.join(" "),
    h1: (document.querySelector("article h1") || {}).textContent || "",
    math: [...document.querySelectorAll("math")].map((m) => ({
      visible: m.checkVisibility(),
      width: m.getBoundingClientRect().width,
    })),
    unrendered: document.querySelectorAll(".arithmatex").length,
    images: [...document.images].map((i) => ({
      src: i.currentSrc || i.src, width: i.naturalWidth, complete: i.complete,
    })),
    header: header ? getComputedStyle(header).backgroundColor : null,
    links: [...document.querySelectorAll("a[href]")].map((a) => a.href),
    navigation: [...document.querySelectorAll(".md-nav--primary a.md-nav__link[href]")]
      .map((a) => a.href),
    toc: [...document.querySelectorAll('a.md-nav__link[href^="#"]')].map((a) => {
      const id = decodeURIComponent(a.getAttribute("href").slice(1));
      const target = document.getElementById(id);
      const heading = target && target.cloneNode(true);
      if (heading) heading.querySelectorAll(".headerlink").forEach((e) => e.remove());
      return {entry: a.textContent, id, heading: heading ? heading.textContent : null};
    }),
  };
}"""

UNSTYLED = {None, "", "rgba(0, 0, 0, 0)", "transparent"}

COPY_BUTTONS = 'button[data-md-type="copy"], button.md-clipboard'
# Click every copy button in turn; what each put on the clipboard, and what its block shows.
# A block in a collapsed admonition or an unselected tab is first shown, as a reader would.
COPY_EVERY_BLOCK = """async (selector) => {
  const reveal = (element) => {
    for (let node = element; node; node = node.parentElement) {
      if (node.tagName === "DETAILS") node.open = true;
      if (node.classList.contains("tabbed-block")) {
        const set = node.closest(".tabbed-set");
        const blocks = [...node.parentElement.children];
        const radios = [...set.children].filter((child) => child.tagName === "INPUT");
        const radio = radios[blocks.indexOf(node)];
        if (radio && !radio.checked) radio.click();
      }
    }
  };
  const found = [];
  for (const button of document.querySelectorAll(selector)) {
    reveal(button);
    await navigator.clipboard.writeText("");
    button.click();
    let copied = await navigator.clipboard.readText();
    for (let wait = 0; wait < 100 && !copied; wait++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
      copied = await navigator.clipboard.readText();
    }
    const code = document.querySelector(button.dataset.clipboardTarget);
    found.push({shown: code ? code.textContent : null, copied});
  }
  return found;
}"""


@dataclass(frozen=True)
class Stop:
    """A page as a visit found it."""

    path: str
    status: int | None  # None from disk
    problems: list[str]
    facts: dict
    extra: Any = None


@dataclass
class Tab:
    page: Page
    base: str  # the site's root URL, ending in /
    errors: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)

    @classmethod
    def open_in(cls, browser: Browser, base: str, **context_options: Any) -> Tab:
        # Light unless asked otherwise: the theme follows the browser's colour scheme.
        context = browser.new_context(**{"color_scheme": "light", **context_options})
        context.set_default_timeout(10_000)
        tab = cls(context.new_page(), base)
        context.route(FOREIGN, tab._block)
        context.on("request", tab._on_request)
        context.on("requestfailed", tab._on_failed)
        context.on("response", tab._on_response)
        context.on("console", tab._on_console)
        context.on("weberror", lambda err: tab.errors.append(f"uncaught: {err.error}"))
        return tab

    # --- what is recorded ---------------------------------------------------------------

    def _block(self, route) -> None:
        if route.request.url not in self.foreign:
            self.foreign.append(route.request.url)
        route.abort("blockedbyclient")

    def _on_request(self, request) -> None:
        if not LOCAL.match(request.url) and request.url not in self.foreign:
            self.foreign.append(request.url)

    def _on_failed(self, request) -> None:
        if request.failure != CANCELLED:
            self.failed.append(f"{request.url}: {request.failure}")

    def _on_response(self, response) -> None:
        if response.status >= 400:
            self.failed.append(f"{response.url}: HTTP {response.status}")

    def _on_console(self, message) -> None:
        if message.type == "error":
            self.errors.append(f"console: {message.text}")

    def problems(self) -> list[str]:
        """Everything that went wrong since the last open()."""
        return self.errors + self.failed + [f"request to another host: {u}" for u in self.foreign]

    # --- moving around ------------------------------------------------------------------

    def reset(self) -> None:
        self.errors.clear()
        self.failed.clear()
        self.foreign.clear()

    def open(self, path: str) -> Response | None:
        self.reset()
        return self.page.goto(self.base + path, wait_until="load")

    def facts(self) -> dict:
        return self.page.evaluate(PAGE_FACTS)

    @property
    def path(self) -> str:
        """The current page's path under the site root, without query or fragment."""
        url = self.page.url.partition("#")[0].partition("?")[0]
        return url.removeprefix(self.base) if url.startswith(self.base) else url

    def follow(self, link) -> Response | None:
        """Click a link as a reader does and wait for the page it leads to."""
        self.reset()
        with self.page.expect_navigation(wait_until="load") as navigation:
            link.click()
        return navigation.value

    def stop(self, response: Response | None, inspect: Callable[[Tab], Any] | None) -> Stop:
        facts = self.facts()
        extra = inspect(self) if inspect else None
        status = response.status if response else None
        return Stop(self.path, status, self.problems(), facts, extra)

    def visit(self, path: str, inspect: Callable[[Tab], Any] | None = None) -> Stop:
        return self.stop(self.open(path), inspect)

    def tour(self, start: str, inspect: Callable[[Tab], Any] | None = None) -> dict[str, Stop]:
        """Read the site as a book: from `start`, follow the footer's "Next" link to the end.

        Each page is looked at (`facts`, then `inspect`) before moving on; the pages come back
        in the order they were reached.
        """
        stops = {}
        response = self.open(start)
        while True:
            stops[self.path] = self.stop(response, inspect)
            following = self.page.locator("a.md-footer__link--next")
            if not following.count():
                return stops
            response = self.follow(following.first)
            if self.path in stops:
                raise AssertionError(f"the Next links loop back to {self.path}: {list(stops)}")

    def copy_every_block(self, *, as_a_reader: bool = True) -> list[dict]:
        """Copy each code block with its button: [{shown, copied}], in page order.

        With `as_a_reader`, the first visible button is clicked as a reader clicks it (hover,
        click); then every button is clicked in the page, which is quicker; a block in a
        collapsed admonition or an unselected tab is opened first.
        """
        buttons = self.page.locator(COPY_BUTTONS)
        visible = [b for b in buttons.all() if b.is_visible()] if as_a_reader else []
        found = []
        if visible:
            self.page.evaluate("navigator.clipboard.writeText('')")
            visible[0].click()
            target = visible[0].get_attribute("data-clipboard-target") or ""
            shown = self.page.eval_on_selector(target, "code => code.textContent")
            found.append({"shown": shown, "copied": self.read_clipboard(), "clicked": True})
        return found + self.page.evaluate(COPY_EVERY_BLOCK, COPY_BUTTONS)

    def search(self, term: str) -> list[str]:
        """Type `term` into the search box; the results' links once they are for all of it."""
        box = self.page.locator(".md-search__input")
        box.click()
        self.page.keyboard.type(term)
        # Results come in as the reader types; wait for the ones for the whole term.
        self.page.wait_for_function(
            """(term) => {
              const meta = document.querySelector(".md-search-result__meta");
              if (meta && /^No matching/.test(meta.textContent.trim())) return true;
              return [...document.querySelectorAll(".md-search-result__link")]
                .some((a) => new URL(a.href).searchParams.get("h") === term);
            }""",
            arg=term,
        )
        return self.page.eval_on_selector_all(
            ".md-search-result__link", "links => links.map((a) => a.href)"
        )

    def read_clipboard(self, timeout: float = 2.0) -> str:
        """What the clipboard holds, once something has been put there."""
        deadline = time.monotonic() + timeout
        while True:
            text = self.page.evaluate("navigator.clipboard.readText()")
            if text or time.monotonic() > deadline:
                return text
            self.page.wait_for_timeout(25)

    def close(self) -> None:
        self.page.context.close()


def site_path(url: str, base: str) -> str:
    """The path of `url` under `base`, without query or fragment ('' if not under it)."""
    url = url.partition("#")[0].partition("?")[0]
    return url.removeprefix(base) if url.startswith(base) else ""


def is_styled(facts: dict) -> bool:
    """Whether the theme's stylesheet applied: the header has its colour."""
    return facts["header"] not in UNSTYLED


class Book:
    """A site read once as a book (Tab.tour); a page the links miss is opened when asked for."""

    def __init__(self, tab: Tab, start: str, inspect: Callable[[Tab], Any] | None = None):
        self.tab, self.inspect = tab, inspect
        self.stops = tab.tour(start, inspect)
        self.order = list(self.stops)  # the pages in the order the links reached them

    def __call__(self, path: str) -> Stop:
        if path not in self.stops:
            self.stops[path] = self.tab.visit(path, self.inspect)
        return self.stops[path]
