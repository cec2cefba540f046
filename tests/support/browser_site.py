"""What the browser tests need to know about the site, without a browser.

- the pages in reading order, from the nav in mkdocs.yml;
- each page's front matter and whether its source has math;
- a static server on 127.0.0.1 that behaves like GitHub Pages: the site under a sub-path,
  `404.html` for anything missing (with status 404), `/<sub>` redirected to `/<sub>/`.
"""

from __future__ import annotations

import functools
import html
import json
import os
import re
import sys
import threading
from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

import yaml
from built_site import ROOT
from site_fixture import SUBPATH  # noqa: F401  (re-exported for the browser tests)

DOCS = ROOT / "docs"


class _TolerantLoader(yaml.SafeLoader):
    """mkdocs.yml uses tags (`!ENV`, `!!python/name:`) that only MkDocs resolves."""


def _environment_value(loader: yaml.SafeLoader, node: yaml.Node) -> str | None:
    """`!ENV NAME` or `!ENV [NAME, ..., default]` as MkDocs reads it (pyyaml_env_tag): the
    first name set in the environment, else the default. The site the tests build sees the
    same environment, so a REPO_URL build links where the tests look."""
    if isinstance(node, yaml.ScalarNode):
        names, default = [loader.construct_scalar(node)], None
    else:
        items = [loader.construct_object(item) for item in node.value]
        names, default = (items[:-1], items[-1]) if len(items) > 1 else (items, None)
    return next((os.environ[n] for n in names if os.environ.get(n)), default)


_TolerantLoader.add_constructor("!ENV", _environment_value)
_TolerantLoader.add_multi_constructor("!", lambda loader, suffix, node: None)
_TolerantLoader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, s, node: None)


@dataclass(frozen=True)
class NavPage:
    title: str  # the label the nav gives it
    src: str  # path under docs/
    url: str  # path of the built page under the site root (the offline plugin: no directory URLs)

    @property
    def source(self) -> Path:
        return DOCS / self.src

    @property
    def slug(self) -> str:
        return self.url.removesuffix(".html").replace("/", "_")


def mkdocs_config() -> dict:
    return yaml.load((ROOT / "mkdocs.yml").read_text("utf8"), Loader=_TolerantLoader)


def _flatten(items: list, title: str | None = None) -> Iterator[NavPage]:
    for item in items:
        if isinstance(item, str):
            yield from _flatten([{None: item}])
            continue
        for label, value in item.items():
            if isinstance(value, list):
                yield from _flatten(value)
            elif not re.match(r"^[a-z][a-z0-9+.-]*://", value):  # external links are not pages
                url = PurePosixPath(value).with_suffix(".html").as_posix()
                yield NavPage(label or page_title(value), value, url)


def page_title(src: str) -> str:
    """A page's title, from its front matter: the nav's label for a page listed without one."""
    text = (DOCS / src).read_text("utf8")
    match = re.match(r"^---\n(.*?)\n---\n", text, re.S)
    title = (yaml.safe_load(match[1]) or {}).get("title") if match else None
    return str(title) if title else PurePosixPath(src).stem


def nav_pages() -> list[NavPage]:
    """The pages in the order the nav lists them: the reading order."""
    return list(_flatten(mkdocs_config()["nav"]))


def front_matter(page: NavPage) -> dict:
    text = page.source.read_text("utf8")
    match = re.match(r"^---\n(.*?)\n---\n", text, re.S)
    return (yaml.safe_load(match[1]) or {}) if match else {}


FENCE = re.compile(r"^([ \t]*)(`{3,}|~{3,}).*?^\1\2[`~]*[ \t]*$", re.S | re.M)
CODE_SPAN = re.compile(r"(`+).+?\1", re.S)
MATH = re.compile(r"\\\(|\\\[|\$\$|\\begin\{")


def has_math(page: NavPage) -> bool:
    """Whether the page's prose (not its code) writes math for arithmatex to render."""
    prose = CODE_SPAN.sub("", FENCE.sub("", page.source.read_text("utf8")))
    return bool(MATH.search(prose))


# --- the search index the build wrote -------------------------------------------------------

WORD = re.compile(r"[a-z]{6,}")


def distinctive_word(
    site: Path, page: NavPage, avoid: AbstractSet[str] = frozenset()
) -> str | None:
    """The longest word of the page's search entries that no other page's entries contain."""
    index = json.loads((site / "search" / "search_index.json").read_text("utf8"))
    words: dict[str, set[str]] = {}
    for doc in index["docs"]:
        location = doc["location"].partition("#")[0].partition("?")[0] or "index.html"
        text = html.unescape(re.sub(r"<[^>]+>", " ", f"{doc['title']} {doc['text']}")).lower()
        words.setdefault(location, set()).update(WORD.findall(text))
    others = set().union(*(w for loc, w in words.items() if loc != page.url))
    unique = words.get(page.url, set()) - others - set(avoid)
    return max(unique, key=lambda w: (len(w), w)) if unique else None


# --- a static server like GitHub Pages ------------------------------------------------------


class _PagesHandler(SimpleHTTPRequestHandler):
    prefix = "/"  # where the site lives, with slashes on both ends

    def log_message(self, format, *args):  # quiet: pytest shows failures, not traffic
        pass

    def translate_path(self, path: str) -> str:
        url_path = urlsplit(path).path
        if url_path == self.prefix.rstrip("/"):
            url_path = self.prefix  # the folder itself: SimpleHTTPRequestHandler redirects to /
        if not url_path.startswith(self.prefix):
            return str(Path(self.directory) / "\0outside-the-site")
        rest = url_path[len(self.prefix) - 1 :]
        return super().translate_path(rest)

    def send_error(self, code, message=None, explain=None):
        page = Path(self.directory) / "404.html"
        if code != 404 or not page.is_file():
            return super().send_error(code, message, explain)
        body = page.read_bytes()
        self.send_response(404)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        return None


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        # A browser that closes a connection it no longer needs is not a test failure.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@contextmanager
def serve(site: Path, prefix: str = "/") -> Iterator[str]:
    """Serve `site` at http://127.0.0.1:PORT{prefix}; yields that base URL (ending in /)."""
    prefix = "/" + prefix.strip("/") + "/" if prefix.strip("/") else "/"
    handler = type("Handler", (_PagesHandler,), {"prefix": prefix})
    server = _QuietServer(("127.0.0.1", 0), functools.partial(handler, directory=site))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}{prefix}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
