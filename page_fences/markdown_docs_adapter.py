"""Everything the fence runner takes from pytest-markdown-docs' private internals, in one place.

pytest-markdown-docs (pinned in requirements.txt) has no public API for replacing how a fence
runs: `pytest_markdown_docs._runners` is private and may change in any release. The runner
(page_fences/pytest_plugin.py) imports only from here, and
tests/docs/test_markdown_docs_adapter.py checks `internals_changed()`, so an upgrade that moves
these names fails one test that says what moved, instead of every page failing, or worse, fences
silently running the plugin's own way.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import inspect
from typing import Any


def plugin_version() -> str:
    try:
        return importlib.metadata.version("pytest-markdown-docs")
    except importlib.metadata.PackageNotFoundError:
        return "(not installed)"


try:
    from pytest_markdown_docs import hooks, plugin
    from pytest_markdown_docs._runners import DefaultRunner, get_runner, register_runner
    from pytest_markdown_docs.definitions import FenceTestDefinition
except ImportError as err:  # pragma: no cover - only on an incompatible upgrade
    raise ImportError(
        f"pytest-markdown-docs {plugin_version()} does not have "
        f"the private API the fence runner (page_fences/pytest_plugin.py) uses: {err}"
    ) from err

__all__ = ["DefaultRunner", "FenceTestDefinition", "internals_changed", "register_default_runner"]

# The fields of FenceTestDefinition the runner reads.
DEFINITION_FIELDS = {"source", "source_path", "start_line"}
# How the plugin calls a runner (plugin.py: MarkdownInlinePythonItem.runtest, .repr_failure).
RUNTEST_PARAMETERS = ["self", "test", "args", "asyncio_runner"]
REPR_FAILURE_PARAMETERS = ["self", "test", "excinfo", "style"]


def register_default_runner(runner: type[Any]) -> type[Any]:
    """Make `runner` the one every fence without a `runner:` option runs with."""
    return register_runner(default=True)(runner)


def _parameters(function: Any) -> list[str]:
    return list(inspect.signature(function).parameters)


def internals_changed(runner: type[Any] | None = None) -> list[str]:
    """What no longer matches the internals this adapter was written against (empty if all do).

    With `runner`, also check that it is the default runner the plugin will use.
    """
    where = f"pytest-markdown-docs {plugin_version()}"
    changed = []
    if "default" not in _parameters(register_runner):
        changed.append(f"{where}: _runners.register_runner() takes no `default` keyword")
    if _parameters(DefaultRunner.runtest) != RUNTEST_PARAMETERS:
        changed.append(
            f"{where}: DefaultRunner.runtest{inspect.signature(DefaultRunner.runtest)}, "
            f"expected parameters {RUNTEST_PARAMETERS}"
        )
    if _parameters(DefaultRunner.repr_failure) != REPR_FAILURE_PARAMETERS:
        changed.append(
            f"{where}: DefaultRunner.repr_failure"
            f"{inspect.signature(DefaultRunner.repr_failure)}, "
            f"expected parameters {REPR_FAILURE_PARAMETERS}"
        )
    fields = {field.name for field in dataclasses.fields(FenceTestDefinition)}
    if missing := DEFINITION_FIELDS - fields:
        changed.append(f"{where}: FenceTestDefinition has no {sorted(missing)}")
    if not hasattr(hooks, "pytest_markdown_docs_markdown_it"):
        changed.append(f"{where}: no hook pytest_markdown_docs_markdown_it to read nested fences")
    if getattr(plugin, "get_runner", None) is not get_runner:
        changed.append(f"{where}: the plugin no longer looks runners up with _runners.get_runner")
    if runner is not None:
        try:
            default = get_runner(None)
        except Exception as err:
            changed.append(f"{where}: get_runner(None) fails: {err!r}")
        else:
            if not isinstance(default, runner):
                changed.append(
                    f"{where}: get_runner(None) returns {type(default).__name__}, not the "
                    f"registered {runner.__name__}: fences would run the plugin's way"
                )
    return changed
