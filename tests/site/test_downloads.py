"""The recipe's download link: the built site serves snippets/recipe.py itself, byte for byte."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import urljoin

import pytest
from built_site import ROOT, BuiltSite
from mkdocs.structure.files import Files

spec = importlib.util.spec_from_file_location("downloads", ROOT / "hooks" / "downloads.py")
downloads = importlib.util.module_from_spec(spec)
spec.loader.exec_module(downloads)


def test_the_site_serves_the_recipe_as_it_is_in_snippets(site: BuiltSite):
    offered = downloads.downloadable()
    assert ROOT / "snippets" / "recipe.py" in offered
    for path in offered:
        served = site.root / "downloads" / path.name
        assert served.read_bytes() == path.read_bytes(), f"{served} is not {path}"


def test_the_recipe_page_links_to_the_served_file(site: BuiltSite):
    page = site.root / "recipe.html"
    links = re.findall(r'<a [^>]*href="((?:[^"]*/)?recipe\.py)"', page.read_text("utf8"))
    assert links, "no link to recipe.py on the recipe page"
    for link in links:
        # relative, so that it works from a copy of the site opened from disk too
        assert "://" not in link and not link.startswith("/")
        target = Path(urljoin(page.as_uri(), link).removeprefix("file://"))
        assert target.read_bytes() == (ROOT / "snippets" / "recipe.py").read_bytes()


def test_a_file_not_written_yet_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "recipe.py").write_text("print('the recipe')\n")
    monkeypatch.setattr(downloads, "SNIPPETS", tmp_path)
    # What File.generated reads of MkDocs' config.
    config = SimpleNamespace(
        site_dir=str(tmp_path / "site"),
        use_directory_urls=False,
        plugins=SimpleNamespace(_current_plugin=None),
    )
    files = downloads.on_files(Files([]), config)
    assert [f.src_uri for f in files] == ["downloads/recipe.py"]
    assert files.get_file_from_path("downloads/recipe.py").abs_src_path == str(
        tmp_path / "recipe.py"
    )
