"""The committed campaign figures: one complete full run, and everything the pages quote.

`CAMPAIGN_RESULTS=docs/assets/bench/campaign.json pytest -m full tests/reliability` writes
the file; the checkpoint and resume pages read it through `{{ bench.campaign.KEY }}`.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator

import pytest
from campaign import MINIMUMS, PHASES, ROOT
from quoted_results import quoted_paths, unresolved

COMMITTED = ROOT / "docs" / "assets" / "bench" / "campaign.json"
PAGES = [ROOT / "docs" / "checkpoints.md", ROOT / "docs" / "exact-resume.md"]
# Every part of the full campaign records one section.
SECTIONS = {
    "kills",
    "kill_phases",
    "power_cuts_commit",
    "power_cuts_atomic_save",
    "power_cuts_save",
    "power_cuts_best",
    "power_cuts_save_best",
    "write_faults",
    "tampering",
    "manifest_flips",
    "malicious",
    "kill_points",
    "new_process_resumes",
    "evaluation",
    "sigterms",
    "bad_input",
}


@pytest.fixture(scope="module")
def committed() -> dict:
    assert COMMITTED.exists(), "run the full campaign with CAMPAIGN_RESULTS=" + str(COMMITTED)
    return json.loads(COMMITTED.read_text("utf8"))


def test_the_committed_figures_are_one_complete_full_run(committed: dict):
    assert set(committed) == SECTIONS | {"provenance", "totals"}
    assert committed["totals"] == {"losses": 0, "trusted_wrongly": 0, "parts": len(SECTIONS)}
    assert committed["kills"]["count"] >= MINIMUMS["kills"]
    assert committed["tampering"]["flips"] >= MINIMUMS["flips"]
    assert committed["tampering"]["truncations"] > 0
    assert committed["sigterms"]["count"] >= MINIMUMS["sigterms"]
    points = committed["kill_points"]
    assert points["count"] == 3 * (points["steps"] - 1) == 3 * points["per_accumulation"]
    assert committed["malicious"]["ran"] == 0
    assert committed["kill_phases"]["count"] == len(PHASES)
    assert committed["kills"]["verified_at_once"] == committed["kills"]["count"]
    for name in (
        "power_cuts_commit",
        "power_cuts_atomic_save",
        "power_cuts_save",
        "power_cuts_best",
        "power_cuts_save_best",
    ):
        assert committed[name]["points"] > 0 and committed[name]["losses"] == 0


def test_every_figure_the_pages_quote_is_in_the_committed_results(committed: dict):
    for page in PAGES:
        assert quoted_paths(page, "campaign"), f"{page.name} quotes no campaign figures"
        assert not unresolved(page, "campaign", committed)


def terminal_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements after which nothing else in `body` runs: its last one and, through `if`
    and `with` (not loops, not `try`), the last ones of the blocks it ends with."""
    last = body[-1]
    yield last
    if isinstance(last, (ast.If, ast.With)):
        yield from terminal_statements(last.body)
    if isinstance(last, ast.If) and last.orelse:
        yield from terminal_statements(last.orelse)


def test_each_full_test_records_its_figures_after_its_assertions():
    """A test records its figures only as the last thing it does, so a recorded part is a part
    whose assertions all passed: each call of `record` in tests/reliability is a whole statement
    that ends its test function, run once."""
    checked = []
    for path in sorted((ROOT / "tests" / "reliability").glob("test_*.py")):
        tree = ast.parse(path.read_text("utf8"))
        for function in tree.body:
            if not isinstance(function, ast.FunctionDef):
                continue
            calls = [
                node
                for node in ast.walk(function)
                if isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "record"
            ]
            terminal = [
                statement.value
                for statement in terminal_statements(function.body)
                if isinstance(statement, ast.Expr)
            ]
            for call in calls:
                where = f"{path.name}:{call.lineno} in {function.name}"
                assert any(call is value for value in terminal), f"{where}: not its last act"
                checked.append(where)
    # one call per section, but one call records the three power_cuts_<kind> sections
    assert len(checked) == len(SECTIONS) - 2
