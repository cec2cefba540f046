"""The tests' own fixtures and scheduling (tests/support is on pytest's path: pyproject.toml):

- `site` (tests/support/site_fixture.py): the site built once per run, for tests/site and
  tests/browser, started in the background as the session begins, with the tests that need
  it moved to the end of the run;
- what this session collected, before `-m` deselects any, for the tests of the collection
  itself (tests/support/collection.py), so they need not run pytest again to learn it;
- under `make test`'s two xdist workers, a module's tests stay in one worker, and so do all of
  tests/browser, so that the fixtures they share are made once
  (tests/support/xdist_scheduling.py).

What every session needs, the pages' blocks included, is the root conftest.py's.
"""

import collection
import pytest
from site_fixture import _site_built_in_the_background, site, site_tests_last
from xdist_scheduling import pytest_xdist_make_scheduler

__all__ = ["_site_built_in_the_background", "pytest_xdist_make_scheduler", "site"]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Before `-m` deselects anything: keep what was collected; then the site's tests last."""
    collection.record(config, items)
    site_tests_last(items)
