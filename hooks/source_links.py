"""Links from a page to a file of the repository: `[name](repo:PATH)`.

An excerpt on a page links to its whole file this way. When the site is built with
`extra.repository` set (mkdocs.yml takes it from REPO_URL, which the workflow sets to the
repository it runs in, so a fork links to itself), the link goes to the file on the repository's
web page at `REPO_REF` (default `main`). Not Material's `repo_url`: with it set, every page would
ask the repository host for its star count, and the site makes no request of its own. Without it
(a local build, `make serve`), the build serves a copy of the file under `source/` and links
there, so the link works offline and from disk. A link to a path that is not a file of the
repository fails the build, naming the page.
"""

from __future__ import annotations

import os
import posixpath
import re
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
FOLDER = "source"
# ](repo:PATH) or ](repo:PATH#anchor); PATH is relative to the repository's root.
LINK = re.compile(r"\]\(repo:(?P<path>[^)#\s]+)(?P<anchor>#[^)\s]*)?\)")


def linked_paths(markdown: str) -> set[str]:
    return {match["path"] for match in LINK.finditer(markdown)}


def check(path: str, where: str) -> None:
    target = (ROOT / path).resolve()
    if ROOT not in target.parents or not target.is_file():
        raise PluginError(f"{where}: repo:{path} is not a file of the repository")


def address(path: str, page_url: str, repo_url: str | None) -> str:
    """Where a link to `path` goes from the page served at `page_url`."""
    if repo_url:
        ref = os.environ.get("REPO_REF") or "main"
        return f"{repo_url.rstrip('/')}/blob/{ref}/{path}"
    here = posixpath.dirname(page_url)
    return posixpath.relpath(f"{FOLDER}/{path}", here or ".")


def rewrite(markdown: str, page_url: str, repo_url: str | None, where: str) -> str:
    def replace(match: re.Match) -> str:
        check(match["path"], where)
        url = address(match["path"], page_url, repo_url)
        return f"]({url}{match['anchor'] or ''})"

    return LINK.sub(replace, markdown)


def on_files(files: Files, config) -> Files:
    if repository(config):
        return files
    wanted: set[str] = set()
    for page in DOCS.rglob("*.md"):
        wanted |= linked_paths(page.read_text("utf8"))
    for path in sorted(wanted):
        check(path, "docs")
        files.append(File.generated(config, f"{FOLDER}/{path}", abs_src_path=str(ROOT / path)))
    return files


def repository(config) -> str | None:
    return (config.get("extra") or {}).get("repository")


def on_page_markdown(markdown: str, page, config, files) -> str:
    return rewrite(markdown, page.file.url, repository(config), page.file.src_uri)
