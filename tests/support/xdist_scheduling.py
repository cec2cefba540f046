"""Which tests share a worker when `make test` runs on pytest-xdist (`-n 2 --dist loadscope`).

A fixture wider than a test is made once per worker that runs a test needing it. So a module's
tests stay in one worker (xdist's `loadscope`), and the folders in SHARED stay in one worker as
a whole: tests/browser's modules share the browser, the built site and the one reading of it
(browser_reading.py), which is most of what they cost.

xdist's own way to say this, `pytest.mark.xdist_group` with `--dist loadgroup`, does nothing on
the pytest we pin (9.2): xdist 3.8 marks a grouped test by rewriting `item._nodeid`, and pytest
9 computes `nodeid` from another attribute. The scheduler below overrides xdist's
`_split_scope`, a private method: tests/docs/test_xdist_scheduling.py fails, and says so, if
xdist changes it.
"""

from __future__ import annotations

import pytest

# pytest-xdist is pinned in requirements.txt; it ships no type information
from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]

# Folders whose tests run in one worker, whatever their module.
SHARED = ("tests/browser/",)


class ModuleOrSharedFolder(LoadScopeScheduling):
    """A test's folder if it is SHARED, else its module (or class), as `loadscope` does."""

    def _split_scope(self, nodeid: str) -> str:
        folder = next((f for f in SHARED if nodeid.startswith(f)), None)
        return folder or super()._split_scope(nodeid)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    if config.getoption("dist") != "loadscope":
        return None  # another --dist: xdist's own scheduler
    return ModuleOrSharedFolder(config, log)
