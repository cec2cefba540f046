"""The tests' own fixtures and scheduling (tests/support is on pytest's path: pyproject.toml):

- `site` (tests/support/site_fixture.py): the site built once per run, for tests/site and
  tests/browser;
- under `make test`'s two xdist workers, a module's tests stay in one worker, and so do all of
  tests/browser, so that the fixtures they share are made once
  (tests/support/xdist_scheduling.py).

What every session needs, the pages' blocks included, is the root conftest.py's.
"""

from site_fixture import site
from xdist_scheduling import pytest_xdist_make_scheduler

__all__ = ["pytest_xdist_make_scheduler", "site"]
