"""The committed campaign figures: one complete full run, and everything the pages quote.

`CAMPAIGN_RESULTS=docs/assets/bench/campaign.json pytest -m full tests/reliability` writes
the file; the checkpoint and resume pages read it through `{{ bench.campaign.KEY }}`.
"""

from __future__ import annotations

import json

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
