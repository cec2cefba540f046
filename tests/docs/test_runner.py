"""The fence runner: included files run as themselves, nested fences run, failures say where.

One small project is tested in a subprocess, with a copy of our conftest.py and our test
support on its path, so the pages below are read exactly as `pytest --markdown-docs` reads ours.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SNIPPET = """\
x = 1
# --8<-- [start:check]
y = x + 1
assert y == 3, "the asserted value is wrong"
# --8<-- [end:check]


class Sample:
    # --8<-- [start:method]
    def twice(self, n: int) -> int:
        return 2 * n

    # --8<-- [end:method]
"""

# One process forked by the means snippets/gloo_ranks.py starts its ranks with.
START_ONE = (
    "import torch.multiprocessing as mp\nmp.start_processes(print, nprocs=1, start_method='fork')"
)

PAGES = {
    "whole": '# Whole\n\n```python\n--8<-- "snippets/sample.py"\n```\n',
    "section": '# Section\n\n```python\nx = 1\n--8<-- "snippets/sample.py:check"\n```\n',
    "mixed": '```python\nx = 2\n--8<-- "snippets/sample.py:check"\nassert y == 3\n```\n',
    "note": "!!! note\n    ```python\n    raise SystemError('ran inside a note')\n    ```\n",
    "tab": '=== "Tab"\n\n    ```python\n    raise SystemError("ran inside a tab")\n    ```\n',
    "missing": '```python\n--8<-- "snippets/nowhere.py"\n```\n',
    "method": '```python\n--8<-- "snippets/sample.py:method"\nassert twice(None, 2) == 4\n```\n',
    "numbered": "# Title\n\ntext\n\n```python\na = 1\nassert a == 2\n```\n",
    # gloo ranks (tests/support/tiers.py): a block that starts processes says so with `.ranks`
    "ranks_unmarked": f"```python\n{START_ONE}\n```\n",
    "ranks_marked": (
        "```{.python .ranks fixture:request}\n"
        f"assert request.node.get_closest_marker('heavy')\n{START_ONE}\n```\n"
    ),
    "ranks_idle": "```{.python .ranks}\nx = 1\n```\n",
}


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """'passed' or 'failed' for each page, and the whole output under 'output'."""
    project = tmp_path_factory.mktemp("project")
    (project / "conftest.py").write_text((ROOT / "conftest.py").read_text("utf8"))
    # The plugins the conftest registers come from our tests/support, as in our pyproject.toml;
    # the ini file also makes the project pytest's rootdir, which include lines are relative to.
    support = ROOT / "tests" / "support"
    (project / "pytest.ini").write_text(
        f"[pytest]\npythonpath = {support}\nmarkers =\n    heavy: make test-all's\n"
    )
    # The root conftest also loads the site-build fixture; this project builds no site.
    (project / "site_fixture.py").write_text("")
    (project / "snippets").mkdir()
    (project / "snippets" / "sample.py").write_text(SNIPPET)
    (project / "docs").mkdir()
    for name, text in PAGES.items():
        (project / "docs" / f"{name}.md").write_text(text)
    args = [
        "--markdown-docs",
        "--markdown-docs-syntax=superfences",
        "-p",
        "no:cacheprovider",
        "--color=no",
    ]
    run = subprocess.run(
        [sys.executable, "-m", "pytest", *args, "-rA", "docs"],
        cwd=project,
        capture_output=True,
        text=True,
        check=False,
    )
    # Only the tracebacks: with CI set, pytest's summary lines repeat whole messages.
    failures = run.stdout.partition(" FAILURES ")[2].partition(" short test summary info ")[0]
    outcomes = {"output": run.stdout, "tracebacks": failures}
    for line in run.stdout.splitlines():
        if line.startswith(("FAILED docs/", "PASSED docs/")):
            outcome, item = line.split()[:2]
            outcomes[item.removeprefix("docs/").split(".md")[0]] = outcome.lower()
    assert set(outcomes) == {*PAGES, "output", "tracebacks"}, run.stdout + run.stderr
    return outcomes


def test_a_failing_snippet_names_its_own_file_and_line(report):
    assert report["whole"] == report["section"] == "failed"
    assert report["tracebacks"].count("snippets/sample.py:4 in <module>") == 2
    assert "the asserted value is wrong" in report["output"]


def test_a_section_runs_without_the_rest_of_its_file(report):
    assert report["mixed"] == "passed"


def test_an_indented_section_runs_dedented_as_it_is_shown(report):
    assert report["method"] == "passed"


def test_fences_in_admonitions_and_tabs_run(report):
    assert "ran inside a note" in report["output"]
    assert "ran inside a tab" in report["output"]
    assert report["note"] == report["tab"] == "failed"


def test_a_missing_include_fails_with_its_name(report):
    assert report["missing"] == "failed"
    assert "no file snippets/nowhere.py" in report["output"]


def test_line_numbers_of_page_code_match_the_page(report):
    assert report["numbered"] == "failed"
    assert "docs/numbered.md:7 in <module>" in report["tracebacks"]


def test_line_numbers_inside_containers_match_the_page(report):
    # The blank line under `=== "Tab"` is kept, so the fence body stays on line 4.
    assert "docs/tab.md:4 in <module>" in report["tracebacks"]
    assert "docs/note.md:3 in <module>" in report["tracebacks"]


def test_a_block_that_starts_ranks_unannounced_fails_before_it_starts_them(report):
    assert report["ranks_unmarked"] == "failed"
    assert "the block at docs/ranks_unmarked.md:1 starts processes" in report["tracebacks"]
    assert "add `.ranks` to the fence's options" in report["tracebacks"]


def test_a_block_marked_ranks_is_heavy_and_may_start_them(report):
    assert report["ranks_marked"] == "passed"


def test_a_block_marked_ranks_that_starts_none_fails(report):
    assert report["ranks_idle"] == "failed"
    assert "has `.ranks` in its options but started no gloo ranks" in report["tracebacks"]
