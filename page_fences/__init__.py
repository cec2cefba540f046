"""The pages' code blocks (fences): how they are found, what they include, and how they run.

The site build (hooks/build_facts.py: a figure a page quotes from its proof) and the tests
(`pytest --markdown-docs`, through the root conftest.py) read and run a fence the same way, with
the modules here; nothing of it lives in the tests' support folder.

- `census`: every fence of a page as a reader sees it, nested in admonitions and tabs
  included, independently of any test plugin; its options (`notest`, `#id`, `.ranks` ...).
- `includes`: the one reader of pymdownx.snippets' include lines, `--8<-- "snippets/x.py"` and
  `--8<-- "code/resume_lab/checkpoint.py:verify"`, cut into the parts a fence runs.
- `run`: run those parts: the fence's own lines and whole files in the fence's namespace, a
  file's section in its module's namespace, each under its own file name and line numbers.
- `isolation`: seeded, in a scratch folder, the global state torch keeps put back afterwards.
- `pytest_plugin`: pytest-markdown-docs reads the pages as MkDocs renders them and runs every
  fence with `run` and `isolation`; the plugin's private API is reached only through
  `markdown_docs_adapter`.
- `tiers`: what `make test` leaves to `make test-all` (`heavy`, `slow`, `full`; a fence that
  starts gloo ranks says so with `.ranks`, another long one with `.heavy`), and the guard
  that keeps it so.
- `lint`: ruff over every fence's code, as snippets/ is linted (`python -m page_fences.lint`).
- `inputs`: the files of the repository that a fence's code imports, at any depth, read from
  disk: what the build's cache of a fence's figures is keyed by (hooks/build_cache.py).

It is installed with the lab (pyproject.toml), so the build's hooks, `versions/` and the root
conftest.py import it by name.
"""
