"""The build refuses to show a lab run that does not show what lab.md says of it."""

from __future__ import annotations

import copy

import pytest
from hook_loading import load_hook
from mkdocs.exceptions import PluginError

lab_report = load_hook("lab_report")

KILL_AT = 2
REPORT = {
    "bitwise_equal": True,
    "curves_equal": True,
    "negative_control_differs": True,
    "first_divergent_step": KILL_AT + 1,
    "kill_at": KILL_AT,
}


def history(*losses: float) -> list[dict]:
    return [{"step": step, "loss": loss} for step, loss in enumerate(losses, 1)]


HISTORIES = {
    "A": history(1.0, 0.9, 0.8, 0.7),
    "B": history(1.0, 0.9, 0.8, 0.7),
    "C": history(1.0, 0.9, 0.85, 0.7),  # leaves A at update 3, after the kill
}


def test_a_run_as_the_page_describes_it_passes():
    lab_report.check_shown(REPORT, HISTORIES)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        pytest.param(lambda r, h: r.update(bitwise_equal=False), "verdict is FAIL", id="verdict"),
        pytest.param(lambda r, h: h["B"][3].update(loss=0.71), "B's loss differs", id="b-off-a"),
        pytest.param(lambda r, h: h["C"][1].update(loss=0.91), "at update 2", id="c-before-kill"),
        pytest.param(lambda r, h: h["C"][2].update(loss=0.8), "at update None", id="c-on-a"),
        pytest.param(
            lambda r, h: r.update(first_divergent_step=4), "first divergence", id="report"
        ),
    ],
)
def test_a_run_that_differs_fails_the_build_saying_how(change, message):
    report, histories = copy.deepcopy(REPORT), copy.deepcopy(HISTORIES)
    change(report, histories)
    with pytest.raises(PluginError, match=message):
        lab_report.check_shown(report, histories)
