"""The fence runner: included files run as themselves, a section in its module's namespace,
nested fences run, failures say where.

One small project is tested in a subprocess, with a copy of our conftest.py (which registers
page_fences' plugins, installed with the lab), so the pages below are read exactly as
`pytest --markdown-docs` reads ours.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# A module whose sections pages show: importing it runs nothing but definitions.
SNIPPET = """\
import math

LIMIT = 3


# --8<-- [start:check]
def check(y: int) -> None:
    assert y == LIMIT, "the asserted value is wrong"


# --8<-- [end:check]


# --8<-- [start:root]
def root(n: float) -> float:
    return math.sqrt(n)


# --8<-- [end:root]


class Sample:
    # --8<-- [start:method]
    def twice(self, n: int) -> int:
        return 2 * n

    # --8<-- [end:method]
"""

# A script shown whole: it runs as itself, and fails on its line 2.
SCRIPT = 'x = 1\nassert x == 2, "the script\'s own check"\n'

# One process forked by the means snippets/gloo_ranks.py starts its ranks with.
START_ONE = (
    "import torch.multiprocessing as mp\nmp.start_processes(print, nprocs=1, start_method='fork')"
)

PAGES = {
    "whole": '# Whole\n\n```python\n--8<-- "snippets/script.py"\n```\n',
    "section": '```python\n--8<-- "snippets/sample.py:check"\ncheck(2)\n```\n',
    "module_names": '```python\n--8<-- "snippets/sample.py:root"\nassert root(9) == 3.0\n```\n',
    "own_names": (
        '```python\n--8<-- "snippets/sample.py:root"\nassert callable(root)\n'
        "assert not {'math', 'LIMIT', 'check', 'Sample'} & set(globals())\n```\n"
    ),
    "note": "!!! note\n    ```python\n    raise SystemError('ran inside a note')\n    ```\n",
    "tab": '=== "Tab"\n\n    ```python\n    raise SystemError("ran inside a tab")\n    ```\n',
    "missing": '```python\n--8<-- "snippets/nowhere.py"\n```\n',
    "method": '```python\n--8<-- "snippets/sample.py:method"\nassert twice(None, 2) == 4\n```\n',
    "numbered": "# Title\n\ntext\n\n```python\na = 1\nassert a == 2\n```\n",
    # gloo ranks (page_fences/tiers.py): a block that starts processes says so with `.ranks`
    "ranks_unmarked": f"```python\n{START_ONE}\n```\n",
    "ranks_marked": (
        "```{.python .ranks fixture:request}\n"
        f"assert request.node.get_closest_marker('heavy')\n{START_ONE}\n```\n"
    ),
    "ranks_idle": "```{.python .ranks}\nx = 1\n```\n",
}


# Every test here reads one pytest run of its own, in a new process: make test-all's.
pytestmark = pytest.mark.heavy


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """'passed' or 'failed' for each page, and the whole output under 'output'."""
    project = tmp_path_factory.mktemp("project")
    (project / "conftest.py").write_text((ROOT / "conftest.py").read_text("utf8"))
    # The ini file makes the project pytest's rootdir, which include lines are relative to,
    # and the folder its sections' modules are imported from (`snippets.sample`).
    (project / "pytest.ini").write_text("[pytest]\nmarkers =\n    heavy: make test-all's\n")
    (project / "snippets").mkdir()
    (project / "snippets" / "sample.py").write_text(SNIPPET)
    (project / "snippets" / "script.py").write_text(SCRIPT)
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


def test_a_failing_file_names_its_own_file_and_line(report):
    assert report["whole"] == "failed"
    assert "snippets/script.py:2 in <module>" in report["tracebacks"]
    assert "the script's own check" in report["output"]


def test_a_failing_section_names_its_file_and_line(report):
    assert report["section"] == "failed"
    assert "snippets/sample.py:8 in check" in report["tracebacks"]
    assert "the asserted value is wrong" in report["output"]


def test_a_section_runs_in_its_module_namespace(report):
    # `root` calls math.sqrt, and the page does not import math: the module does.
    assert report["module_names"] == "passed"


def test_a_fence_gets_what_its_section_defines_and_nothing_else(report):
    assert report["own_names"] == "passed"


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
