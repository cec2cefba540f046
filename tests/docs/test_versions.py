"""The recorded runs on other torch releases (docs/assets/versions/, `make test-versions`).

The runs themselves download gigabytes, so they are not repeated here: these tests check that
the committed results are complete and agree with what the pages say about versions, and that
the recorder turns pytest's outcomes into the right verdict per claim.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from versions import matrix
from versions.__main__ import nodes_of, verdict

ROOT = Path(__file__).resolve().parents[2]


def entries() -> list[dict]:
    return matrix.claims()


def test_runs_are_recorded_for_the_course_release_the_pinned_one_and_a_newer_one():
    releases = [run["release"] for run in matrix.runs()]
    installed = torch.__version__.split("+")[0]
    assert "2.8.0" in releases, "no run of torch 2.8.0: make test-versions"
    assert installed in releases, f"no run of the installed torch {installed}"
    assert matrix.release_key(releases[-1]) > matrix.release_key(installed), releases
    for run in matrix.runs():
        assert run["torch"].startswith(run["release"]) and run["pytest"], run["release"]


def test_a_claim_said_to_have_changed_since_a_release_fails_there_and_passes_here():
    installed = torch.__version__.split("+")[0]
    changed = [e for e in entries() if "changed_since" in e]
    assert changed, "no entry says a release changed it"
    problems = []
    for entry in changed:
        before = matrix.result(matrix.run_of(str(entry["changed_since"])), entry["id"])
        now = matrix.result(matrix.run_of(installed), entry["id"])
        if (before["result"], now["result"]) != ("failed", "passed"):
            problems.append(
                f"{entry['id']}: on {entry['changed_since']} {before['result']}, "
                f"on {installed} {now['result']}; a version change needs a proof that fails "
                "on the older release, or the sentence is a correction of the text"
            )
    assert not problems, "\n".join(problems)


def test_the_corrections_hold_on_every_recorded_release():
    corrections = [
        e
        for e in entries()
        if e["page"].startswith("changes.md#")
        and "changed_since" not in e
        and e["status"] in ("make-test", "make-test-all")  # not this test's own entry
    ]
    assert corrections
    problems = [
        f"{e['id']} on torch {run['release']}: {matrix.result(run, e['id'])}"
        for run in matrix.runs()
        for e in corrections
        if matrix.result(run, e["id"])["result"] != "passed"
    ]
    assert not problems, "\n".join(problems)


def test_every_proved_claim_passes_on_the_installed_release_as_recorded():
    run = matrix.run_of(torch.__version__)
    failed = [e["id"] for e in entries() if matrix.result(run, e["id"])["result"] == "failed"]
    assert not failed, f"recorded as failing on the pinned torch: {failed}"


def test_the_recorder_gives_each_claim_the_verdict_of_its_proof(tmp_path):
    fences = {("x.md", "good"): 3, ("x.md", "bad"): 9}
    rows = {
        "docs/x.md::[CodeFence#1][line:3]": {"outcome": "passed", "when": "call"},
        "docs/x.md::[CodeFence#2][line:9]": {
            "outcome": "failed",
            "when": "call",
            "where": "docs/x.md:12",
            "message": "AssertionError: 1 != 2",
        },
    }
    good = {"id": "g", "status": "make-test", "proof": "x.md#good"}
    bad = {"id": "b", "status": "make-test", "proof": "x.md#bad"}
    slow = {"id": "s", "status": "make-test-all", "proof": "tests/t.py::test_slow"}
    stated = {"id": "t", "status": "stated", "reason": "no GPU"}
    assert verdict(good, nodes_of(good, fences, rows)) == {"result": "passed"}
    assert verdict(bad, nodes_of(bad, fences, rows)) == {
        "result": "failed",
        "where": "docs/x.md:12",
        "message": "AssertionError: 1 != 2",
    }
    assert verdict(slow, nodes_of(slow, fences, rows))["result"] == "not run"
    assert verdict(stated, []) == {"result": "stated"}


def test_the_results_files_are_json_with_a_verdict_per_claim():
    for path in sorted(matrix.RESULTS.glob("torch-*.json")):
        run = json.loads(path.read_text("utf8"))
        assert path.name == f"torch-{run['release']}.json"
        outcomes = {c["result"] for c in run["claims"].values()}
        assert outcomes <= {"passed", "failed", "not run", "skipped", "stated"}, outcomes
