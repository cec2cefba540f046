"""Put facts computed at build time into the pages: `{{ version.torch }}` and friends.

A page never types a version: it names one, and the build fills it in from what is installed.
An unknown name fails the build, so a typo cannot reach a reader.
"""

from __future__ import annotations

import importlib.metadata
import platform
import re
from collections.abc import Callable

from mkdocs.exceptions import PluginError

PLACEHOLDER = re.compile(r"\{\{\s*(?P<name>[a-z_]+(?:\.[a-z_]+)*)\s*\}\}")


def package_version(name: str) -> Callable[[], str]:
    return lambda: importlib.metadata.version(name)


FACTS: dict[str, Callable[[], str]] = {
    "version.torch": lambda: __import__("torch").__version__,
    "version.numpy": package_version("numpy"),
    "version.safetensors": package_version("safetensors"),
    "version.mkdocs_material": package_version("mkdocs-material"),
    "version.python": platform.python_version,
}


def verified_with() -> str:
    return (
        f"torch {FACTS['version.torch']()}, numpy {FACTS['version.numpy']()}, "
        f"safetensors {FACTS['version.safetensors']()}, Python {FACTS['version.python']()}"
    )


FACTS["verified_with"] = verified_with


def on_page_markdown(markdown: str, page, config, files) -> str:
    def fill(match: re.Match) -> str:
        name = match["name"]
        if name not in FACTS:
            known = ", ".join(sorted(FACTS))
            raise PluginError(f"{page.file.src_uri}: unknown fact {{{{ {name} }}}}; known: {known}")
        return FACTS[name]()

    return PLACEHOLDER.sub(fill, markdown)
