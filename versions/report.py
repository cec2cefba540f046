"""A pytest plugin that writes each test's outcome as one JSON line (the run's raw results).

`python -m versions` loads it with `-p versions.report` and names the file in
VERSIONS_REPORT. A failure keeps where it happened on a page (the deepest frame in a
docs/*.md file, as the fence runner prints it) and the exception's one-line message. A test
that `-m` deselected gets a line too (outcome `deselected`), so that a proof left out by the
markers is told apart from one that was never collected.
"""

from __future__ import annotations

import json
import os
import re

import pytest

PAGE_FRAME = re.compile(r"(docs/[\w-]+\.md):(\d+)")


def failure(report: pytest.TestReport) -> dict[str, str]:
    text = str(report.longrepr)
    pages = PAGE_FRAME.findall(text)
    lines = [line for line in text.strip().splitlines() if line.strip()]
    crash = getattr(report.longrepr, "reprcrash", None)
    message = crash.message if crash is not None else (lines[-1] if lines else "")
    found = {"message": message.splitlines()[0][:300] if message else ""}
    if pages:
        found["where"] = ":".join(pages[-1])
    return found


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    path = os.environ.get("VERSIONS_REPORT")
    if not path or (report.when != "call" and report.passed):
        return
    if report.when == "call" or report.failed or report.skipped:
        row = {"node": report.nodeid, "when": report.when, "outcome": report.outcome}
        if report.failed:
            row |= failure(report)
        with open(path, "a", encoding="utf8") as out:
            out.write(json.dumps(row) + "\n")


def pytest_deselected(items: list[pytest.Item]) -> None:
    path = os.environ.get("VERSIONS_REPORT")
    if not path:
        return
    with open(path, "a", encoding="utf8") as out:
        for item in items:
            row = {"node": item.nodeid, "when": "collect", "outcome": "deselected"}
            out.write(json.dumps(row) + "\n")
