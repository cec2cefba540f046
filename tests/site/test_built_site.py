"""The built site: strict, complete, and fetching nothing from another host."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from urllib.parse import urlsplit

from built_site import ROOT, BuiltSite

LOCAL_HOSTS = {"", "127.0.0.1", "localhost"}
# <link rel=...> values that make a browser fetch the href.
FETCHING_RELS = {"stylesheet", "icon", "preload", "modulepreload", "prefetch", "manifest"}
CSS_URL = re.compile(r"""url\(\s*['"]?(?P<url>[^'")\s]+)|@import\s+['"](?P<imp>[^'"]+)""")


class FetchedUrls(HTMLParser):
    """Collects every URL a browser would request while loading a page."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        for key in ("src", "data", "poster"):
            if a.get(key):
                self.urls.append(a[key])
        if a.get("srcset"):
            self.urls += [part.split()[0] for part in a["srcset"].split(",") if part.strip()]
        if tag == "link" and FETCHING_RELS & set(a.get("rel", "").split()):
            self.urls.append(a["href"])
        if a.get("style"):
            self.urls += [m["url"] or m["imp"] for m in CSS_URL.finditer(a["style"])]


def foreign(url: str) -> bool:
    parts = urlsplit(url)
    if parts.scheme in {"data", "blob", "file", "about", "javascript", "mailto"}:
        return False
    return parts.hostname not in LOCAL_HOSTS if parts.netloc else False


def test_strict_build_has_no_warnings(site: BuiltSite):
    assert "WARNING" not in site.log, site.log


def test_every_page_in_docs_is_built(site: BuiltSite):
    sources = {
        p.relative_to(ROOT / "docs").with_suffix(".html") for p in (ROOT / "docs").rglob("*.md")
    }
    built = {p.relative_to(site.root) for p in site.pages()}
    assert sources <= built


def test_nothing_is_fetched_from_another_host(site: BuiltSite):
    offenders = []
    for page in site.pages():
        parser = FetchedUrls()
        parser.feed(page.read_text("utf8"))
        offenders += [f"{page.relative_to(site.root)}: {u}" for u in parser.urls if foreign(u)]
    for sheet in site.root.rglob("*.css"):
        for m in CSS_URL.finditer(sheet.read_text("utf8")):
            url = m["url"] or m["imp"]
            if foreign(url):
                offenders.append(f"{sheet.relative_to(site.root)}: {url}")
    assert not offenders, "\n".join(offenders)


def test_the_scan_would_catch_a_cdn():
    parser = FetchedUrls()
    parser.feed(
        '<script src="https://cdn.example/x.js"></script>'
        '<link rel="stylesheet" href="//fonts.example/css">'
        '<a href="https://example.org/">a link is not fetched</a>'
        '<img src="assets/local.png">'
    )
    assert [u for u in parser.urls if foreign(u)] == [
        "https://cdn.example/x.js",
        "//fonts.example/css",
    ]


def test_math_is_rendered_as_mathml(site: BuiltSite):
    for page in site.pages():
        text = page.read_text("utf8")
        assert 'class="arithmatex"' not in text, f"{page.name}: math left for a script to render"
    assert "<math" in (site.root / "index.html").read_text("utf8")


def test_facts_are_filled_in(site: BuiltSite):
    for page in site.pages():
        assert not re.search(r"\{\{\s*[a-z_.]+\s*\}\}", page.read_text("utf8")), page.name
    import torch

    assert f"torch {torch.__version__}" in (site.root / "index.html").read_text("utf8")


def test_search_works_from_disk(site: BuiltSite):
    # The offline plugin inlines the index so search runs without a server (file://).
    index = site.root / "search" / "search_index.js"
    assert index.read_text("utf8").startswith("var __index = ")
    assert (site.root / "assets/vendor/iframe-worker/shim.js").stat().st_size > 0
    assert 'src="assets/vendor/iframe-worker/shim.js"' in (site.root / "index.html").read_text(
        "utf8"
    )


def test_included_snippets_appear_on_the_page(site: BuiltSite):
    html = (site.root / "index.html").read_text("utf8")
    assert "--8&lt;--" not in html and "--8<--" not in html
    assert "lr_after_micro" in html
