"""One strict build of the site per test session, shared by the site and browser tests, and
started as soon as the session knows it needs one.

Under pytest-xdist (`make test` runs two workers) the session is split over processes, and each
would build the site for itself. So the build goes into the run's shared temporary folder,
under a file lock, once:

- at a worker's first test, if any test of the session needs the site (its `site` fixture),
  the build starts in a process of its own (tests/support/built_site.py), while the workers
  run the tests that need no site;
- the tests that need it are moved to the end of the session's order, so that by the time
  they run the build is usually done; the `site` fixture waits for it and reads its record;
- with no build started (a plain `pytest tests/site/test_nav.py`), the fixture builds.

A background build still running when its worker's session ends is stopped.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from built_site import ROOT, BuiltSite, build_site, read_record, write_record
from filelock import FileLock

# GitHub Pages serves a project site under /REPO/; the tests build and serve it the same way.
SUBPATH = "training-loop"
SITE_URL = f"http://127.0.0.1/{SUBPATH}/"
FIXTURE = "site"
# How long a test waits for the background build (under load, the full build of a cold cache
# takes minutes).
WAIT_S = 1800


def needs_site(item: pytest.Item) -> bool:
    return FIXTURE in getattr(item, "fixturenames", ())


def site_tests_last(items: list[pytest.Item]) -> None:
    """The modules with a test that needs the built site run last, each in its own order
    (tests/conftest.py calls this as the session's items are collected)."""
    later = {item.nodeid.partition("::")[0] for item in items if needs_site(item)}
    items[:] = sorted(items, key=lambda item: item.nodeid.partition("::")[0] in later)


def shared_folder(factory: pytest.TempPathFactory) -> Path:
    """The run's folder: under xdist, each worker's base folder lies in it (pytest-N/popen-gwK),
    so it is shared by the workers of this run and by no other run."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return factory.getbasetemp().parent
    return factory.getbasetemp()


def places(factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """The site's folder, the record of its finished build, and the mark of a started one."""
    shared = shared_folder(factory)
    return shared / "site", shared / "site.json", shared / "site.started"


@pytest.fixture(scope="session", autouse=True)
def _site_built_in_the_background(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    if not any(needs_site(item) for item in request.session.items):
        yield
        return
    root, record, started = places(tmp_path_factory)
    process = None
    with FileLock(f"{record}.lock"):
        if not record.is_file() and not started.is_file():
            process = subprocess.Popen(
                [sys.executable, str(Path(__file__).with_name("built_site.py")), root, record],
                cwd=ROOT,
                env={**os.environ, "SITE_URL": SITE_URL},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # so that its mkdocs child is stopped with it
            )
            started.write_text(str(process.pid), "utf8")
    yield
    if process is not None and process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=60)


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> BuiltSite:
    """The site built as the workflow builds it for GitHub Pages: its address has a sub-path."""
    root, record, started = places(tmp_path_factory)
    with FileLock(f"{record}.lock"):
        if record.is_file():
            return read_record(root, record)
        if not started.is_file():
            built = build_site(root, SITE_URL=SITE_URL)
            write_record(record, 0, built.log)
            return built
    return wait_for(root, record, int(started.read_text("utf8")))


def wait_for(root: Path, record: Path, pid: int) -> BuiltSite:
    deadline = time.monotonic() + WAIT_S
    while not record.is_file():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the site's build (pid {pid}) did not end in {WAIT_S} s")
        if not alive(pid) and not record.is_file():
            raise AssertionError(f"the site's build (pid {pid}) ended without its record")
        time.sleep(0.2)
    return read_record(root, record)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A child of this process that ended and was not reaped yet is a zombie: not building.
    try:
        return os.waitpid(pid, os.WNOHANG) == (0, 0)
    except ChildProcessError:
        return True
