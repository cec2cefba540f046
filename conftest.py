"""Plugins for every test session.

- fence_runner (tests/support/fence_runner.py): pytest-markdown-docs reads the pages as MkDocs
  renders them (fences in admonitions and tabs, `--8<--` includes run as the real files), and
  every fence and test runs seeded in a fresh temporary folder, with global state restored.
- site_fixture: the built site, shared by tests/site and tests/browser.
- xdist_scheduling: under `make test`'s two workers, a module's tests stay in one worker, and so
  do all of tests/browser, so the fixtures they share are made once.

(tests/support is on pytest's path: pyproject.toml, `pythonpath`.)
"""

pytest_plugins = ["fence_runner", "site_fixture", "xdist_scheduling", "tiers"]
