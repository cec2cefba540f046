"""The build hook that fills in versions and printed output: right values, loud failures."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch
from built_site import ROOT
from mkdocs.exceptions import PluginError

spec = importlib.util.spec_from_file_location("build_facts", ROOT / "hooks" / "build_facts.py")
build_facts = importlib.util.module_from_spec(spec)
spec.loader.exec_module(build_facts)

PAGE = SimpleNamespace(file=SimpleNamespace(src_uri="page.md"))


def fill(markdown: str) -> str:
    return build_facts.on_page_markdown(markdown, PAGE, None, None)


def test_versions_come_from_the_installed_packages():
    assert fill("torch {{ version.torch }}").startswith(f"torch {torch.__version__}\n")
    assert torch.__version__ in fill("{{ verified_with }}")


def test_an_unknown_name_fails_the_build_naming_the_page():
    with pytest.raises(PluginError, match=r"page\.md: \{\{ version\.torhc \}\}: unknown fact"):
        fill("{{ version.torhc }}")


@pytest.mark.parametrize("text", ["{{ fence.some-id.TOLERANCE }}", "{{ Version.torch }}"])
def test_a_placeholder_the_hook_cannot_read_fails_the_build(text: str):
    """An upper-case name escaped the placeholder pattern and reached the page as text."""
    with pytest.raises(PluginError, match=r"page\.md: .* was not filled in"):
        fill(f"a figure: {text}.")


def test_a_missing_snippet_fails_the_build():
    with pytest.raises(PluginError, match=r"no snippet snippets/nowhere\.py"):
        fill("{{ output.nowhere }}")


def test_output_is_what_the_snippet_prints_when_run():
    printed = subprocess.run(
        [sys.executable, str(ROOT / "snippets" / "three_clocks.py")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert fill("{{ output.three_clocks }}").startswith(printed.rstrip("\n") + "\n\n---")


def test_every_page_states_the_versions_it_was_verified_with():
    assert f"Verified with torch {torch.__version__}" in fill("# A page")


def test_bench_values_come_from_the_results_file(tmp_path, monkeypatch):
    results = tmp_path / "docs" / "assets" / "bench"
    results.mkdir(parents=True)
    (results / "demo.json").write_text('{"save": {"ratio": 2.5}}')
    monkeypatch.setattr(build_facts, "ROOT", tmp_path)
    assert fill("{{ bench.demo.save.ratio }}").startswith("2.5\n")
    with pytest.raises(PluginError, match=r"has no 'save\.median'"):
        fill("{{ bench.demo.save.median }}")
    with pytest.raises(PluginError, match="run `make bench`"):
        fill("{{ bench.missing.x }}")
