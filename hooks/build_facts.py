"""Put facts computed at build time into the pages.

A page never types a version or a printed result: it names one, and the build fills it in.

- `{{ version.torch }}`, `{{ verified_with }}`: what is installed.
- `{{ output.NAME }}`: what `snippets/NAME.py` prints when run (the same file the page includes
  and the tests execute), run once per build in a temporary folder, seeded as the tests seed it.
- `{{ bench.FILE.KEY.SUBKEY }}`: a value from `docs/assets/bench/FILE.json`, the results that
  `make bench` last wrote (with the machine, versions and date they were measured on).

An unknown name fails the build, so a typo cannot reach a reader.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import io
import json
import os
import platform
import random
import re
import runpy
import tempfile
from collections.abc import Callable
from pathlib import Path

from mkdocs.exceptions import PluginError

PLACEHOLDER = re.compile(r"\{\{\s*(?P<name>[a-z_]+(?:\.[a-z0-9_]+)*)\s*\}\}")


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


# Every page says which versions its code blocks were executed on.
VERIFIED_FOOTER = (
    "\n\n---\n\n<small>Verified with {}: every code block on this page ran on these versions "
    "when the site was built and tested.</small>\n"
)
ROOT = Path(__file__).resolve().parent.parent
SEED = 0  # the seed conftest.py gives every fence
_outputs: dict[tuple[Path, float], str] = {}


def snippet_output(name: str) -> str:
    """What snippets/NAME.py prints, cached until the file changes (for `mkdocs serve`)."""
    path = ROOT / "snippets" / f"{name.replace('.', '/')}.py"
    if not path.is_file():
        raise LookupError(f"no snippet {path.relative_to(ROOT)}")
    key = (path, path.stat().st_mtime)
    if key not in _outputs:
        _outputs[key] = run_snippet(path)
    return _outputs[key]


def run_snippet(path: Path) -> str:
    import numpy as np
    import torch

    torch_rng, python_rng, numpy_rng = (
        torch.get_rng_state(),
        random.getstate(),
        np.random.get_state(),
    )
    threads, dtype = torch.get_num_threads(), torch.get_default_dtype()
    cwd, printed = os.getcwd(), io.StringIO()
    torch.manual_seed(SEED)
    random.seed(SEED)
    np.random.seed(SEED)
    try:
        with tempfile.TemporaryDirectory() as scratch, contextlib.redirect_stdout(printed):
            os.chdir(scratch)
            runpy.run_path(str(path), run_name="__main__")
    finally:
        os.chdir(cwd)
        torch.set_rng_state(torch_rng)
        random.setstate(python_rng)
        np.random.set_state(numpy_rng)
        torch.set_num_threads(threads)
        torch.set_default_dtype(dtype)
    return printed.getvalue().rstrip("\n")


def bench_value(dotted: str) -> str:
    """A value from docs/assets/bench/FILE.json, by its dotted path."""
    file, _, path = dotted.partition(".")
    results = ROOT / "docs" / "assets" / "bench" / f"{file}.json"
    if not results.is_file():
        raise LookupError(f"no results {results.relative_to(ROOT)}: run `make bench`")
    value = json.loads(results.read_text("utf8"))
    for key in path.split("."):
        if not isinstance(value, dict) or key not in value:
            raise LookupError(f"{results.relative_to(ROOT)} has no {path!r} (stuck at {key!r})")
        value = value[key]
    return str(value)


def lookup(name: str) -> str:
    if name.startswith("output."):
        return snippet_output(name.removeprefix("output."))
    if name.startswith("bench."):
        return bench_value(name.removeprefix("bench."))
    if name not in FACTS:
        known = ", ".join([*sorted(FACTS), "output.NAME", "bench.FILE.KEY"])
        raise LookupError(f"unknown fact; known: {known}")
    return FACTS[name]()


def on_page_markdown(markdown: str, page, config, files) -> str:
    def fill(match: re.Match) -> str:
        try:
            return lookup(match["name"])
        except Exception as err:
            raise PluginError(f"{page.file.src_uri}: {match[0]}: {err}") from err

    return PLACEHOLDER.sub(fill, markdown) + VERIFIED_FOOTER.format(verified_with())
