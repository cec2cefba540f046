"""Plugins for every test session, the pages' blocks included (page_fences/, installed with the
lab):

- page_fences.pytest_plugin: pytest-markdown-docs reads the pages as MkDocs renders them
  (fences in admonitions and tabs, `--8<--` includes run as the real files, a section in its
  module's namespace), and every fence and test runs seeded in a fresh temporary folder, with
  global state restored.
- page_fences.tiers: what `make test` leaves to `make test-all`; a fence that starts gloo
  ranks (`.ranks`) is `heavy`, and one of the inner loop that starts them fails at once.

The tests' own fixtures and scheduling (the built site, the xdist workers) are registered by
tests/conftest.py.
"""

pytest_plugins = ["page_fences.pytest_plugin", "page_fences.tiers"]
