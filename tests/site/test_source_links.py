"""Links to a file of the repository (`repo:PATH`): checked at build time, served from the site
itself when no repository address is configured, and the repository's page when it is."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urljoin

import pytest
from built_site import ROOT, BuiltSite
from hook_loading import load_hook
from mkdocs.exceptions import PluginError

source_links = load_hook("source_links")

PAGE = "See [the file](repo:snippets/recipe.py#L10) and [again](repo:snippets/recipe.py)."


def test_without_a_repository_address_the_link_is_relative_to_the_served_copy():
    out = source_links.rewrite(PAGE, "checkpoints.html", None, "checkpoints.md")
    assert "(source/snippets/recipe.py#L10)" in out and "(source/snippets/recipe.py)" in out
    deeper = source_links.rewrite(PAGE, "a/b.html", None, "a/b.md")
    assert "(../source/snippets/recipe.py)" in deeper


def test_with_a_repository_address_the_link_goes_to_its_page(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("REPO_REF", raising=False)
    out = source_links.rewrite(PAGE, "x.html", "https://github.com/me/fork/", "x.md")
    assert "(https://github.com/me/fork/blob/main/snippets/recipe.py#L10)" in out
    monkeypatch.setenv("REPO_REF", "v2")
    out = source_links.rewrite(PAGE, "x.html", "https://github.com/me/fork", "x.md")
    assert "(https://github.com/me/fork/blob/v2/snippets/recipe.py)" in out


@pytest.mark.parametrize("path", ["snippets/no_such_file.py", "../etc/passwd", "snippets"])
def test_a_path_that_is_not_a_file_of_the_repository_fails_the_build(path: str):
    with pytest.raises(PluginError, match=re.escape(f"x.md: repo:{path} is not a file")):
        source_links.rewrite(f"[a](repo:{path})", "x.html", None, "x.md")


def test_every_served_source_link_on_the_built_site_is_the_file_itself(site: BuiltSite):
    checked = 0
    for page in site.root.rglob("*.html"):
        # relative links only: an address elsewhere (a project's doc/source/) is not a copy
        for link in re.findall(r'href="((?![a-z]+:)[^"#]*source/[^"#]+)', page.read_text("utf8")):
            target = Path(urljoin(page.as_uri(), link).removeprefix("file://"))
            relative = target.relative_to(site.root / "source")
            assert target.read_bytes() == (ROOT / relative).read_bytes(), f"{page}: {link}"
            checked += 1
    wanted = set()
    for page in (ROOT / "docs").rglob("*.md"):
        wanted |= source_links.linked_paths(page.read_text("utf8"))
    assert (checked > 0) == bool(wanted)
