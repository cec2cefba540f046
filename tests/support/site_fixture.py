"""One strict build of the site per test session, shared by the site and browser tests."""

from __future__ import annotations

import pytest
from built_site import BuiltSite, build_site

# GitHub Pages serves a project site under /REPO/; the tests build and serve it the same way.
SUBPATH = "training-loop"


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> BuiltSite:
    """The site built as the workflow builds it for GitHub Pages: its address has a sub-path."""
    return build_site(tmp_path_factory.mktemp("site"), SITE_URL=f"http://127.0.0.1/{SUBPATH}/")
