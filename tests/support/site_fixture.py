"""One strict build of the site per test session, shared by the site and browser tests.

Under pytest-xdist (`make test` runs two workers) the session is split over processes, and each
would build the site for itself. The first worker that needs it builds it into the run's shared
temporary folder under a file lock; the other waits for that build and reads the same files.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from built_site import BuiltSite, build_site
from filelock import FileLock

# GitHub Pages serves a project site under /REPO/; the tests build and serve it the same way.
SUBPATH = "training-loop"
SITE_URL = f"http://127.0.0.1/{SUBPATH}/"


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> BuiltSite:
    """The site built as the workflow builds it for GitHub Pages: its address has a sub-path."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return build_site(tmp_path_factory.mktemp("site"), SITE_URL=SITE_URL)
    # Each worker's base folder lies in the run's own folder (pytest-N/popen-gwK): its parent
    # is shared by the workers of this run and by no other run.
    shared = tmp_path_factory.getbasetemp().parent
    return build_once(shared / "site", shared / "site.json")


def build_once(root: Path, record: Path) -> BuiltSite:
    """Build into `root` unless a worker of this run has; `record` marks a finished build."""
    with FileLock(f"{record}.lock"):
        if record.is_file():
            return BuiltSite(root, json.loads(record.read_text("utf8"))["log"])
        built = build_site(root, SITE_URL=SITE_URL)
        record.write_text(json.dumps({"log": built.log}), "utf8")
        return built
