"""The build hook that fills in versions and printed output: right values, loud failures."""

from __future__ import annotations

import re
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch
from built_site import ROOT
from hook_loading import load_hook
from mkdocs.exceptions import PluginError

build_facts = load_hook("build_facts")

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


@pytest.mark.heavy  # a new process imports torch
def test_output_is_what_the_snippet_prints_when_run():
    printed = subprocess.run(
        [sys.executable, str(ROOT / "snippets" / "three_clocks.py")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert fill("{{ output.three_clocks }}").startswith(printed.rstrip("\n") + "\n\n<small>")


def test_every_page_states_the_versions_it_was_verified_with():
    assert f"Tested with torch {torch.__version__}, numpy" in fill("# A page")


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


def test_a_multi_line_value_keeps_the_indentation_of_its_placeholder():
    """Inside a fold, every line of the output stays in the fold's fence."""
    printed = fill("{{ output.serialization_view_bytes }}").split("\n\n<small>")[0].splitlines()
    assert len(printed) > 1
    fold = '??? success "Proof"\n    ```text\n    {{ output.serialization_view_bytes }}\n    ```\n'
    folded = fill(fold)
    body = folded.split("```text\n")[1].split("    ```")[0].splitlines()
    assert body == ["    " + line if line else "    " for line in printed]
    # In running text the value is put in as it is.
    assert fill("a {{ output.serialization_view_bytes }}").startswith("a " + "\n".join(printed))


RECIPE = ROOT / "snippets" / "recipe.py"


def span(placeholder: str) -> tuple[int, int]:
    """(first, last) from "lines FIRST–LAST", as the page shows it."""
    text = fill(placeholder).partition("\n")[0]
    assert text.startswith("lines "), text
    first, _, last = text.removeprefix("lines ").partition("\u2013")
    return int(first), int(last)


def test_recipe_lines_are_read_from_the_file_itself():
    lines = RECIPE.read_text("utf8").splitlines()
    first, last = span("{{ recipe.save_checkpoint }}")
    assert lines[first - 1].startswith("def save_checkpoint(")
    # its last line: the next one is blank or starts another top-level statement
    assert lines[last - 1].startswith("    ") and not lines[last].startswith(" ")
    assert fill("{{ recipe.length }}").startswith(f"{len(lines)}\n")


def test_recipe_lines_start_at_a_decorator_and_span_from_one_function_to_another():
    lines = RECIPE.read_text("utf8").splitlines()
    first, _ = span("{{ recipe.evaluate }}")
    assert lines[first - 1].startswith("@") and lines[first].startswith("def evaluate(")
    capture, restore = span("{{ recipe.capture_rng }}"), span("{{ recipe.restore_rng }}")
    assert span("{{ recipe.capture_rng-restore_rng }}") == (capture[0], restore[1])


def test_recipe_constants_and_unknown_names():
    micro_batch = re.search(r"^MICRO_BATCH = (\d+)", RECIPE.read_text("utf8"), re.M)
    assert fill("{{ recipe.micro_batch }}").startswith(f"{micro_batch[1]}\n")
    with pytest.raises(PluginError, match=r"defines no top-level function or constant 'nowhere'"):
        fill("{{ recipe.nowhere }}")
    with pytest.raises(PluginError, match=r"comes before"):
        fill("{{ recipe.restore_rng-capture_rng }}")
