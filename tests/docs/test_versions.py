"""The recorded runs on other torch releases (docs/assets/versions/, `make test-versions`).

The runs themselves download gigabytes, so they are not repeated here: these tests check that
the committed results are complete and agree with what the pages say about versions, that the
claims the Other torch releases page words as version facts were recorded with the proofs the
pages hold now, and that the recorder turns pytest's outcomes into the right verdict per claim.
"""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from pathlib import Path

import torch
from hook_loading import load_hook

import versions.__main__ as recorder
from versions import matrix
from versions.__main__ import nodes_of, verdict
from versions.proofs import digest, fence_where, proof_digests

ROOT = Path(__file__).resolve().parents[2]
ledger_facts = load_hook("ledger_facts")


def entries() -> list[dict]:
    return matrix.claims()


def test_runs_are_recorded_for_the_course_release_the_pinned_one_and_a_newer_one():
    releases = [run["release"] for run in matrix.runs()]
    installed = torch.__version__.split("+")[0]
    assert "2.8.0" in releases, "no run of torch 2.8.0: make test-versions"
    assert installed in releases, f"no run of the installed torch {installed}"
    newest = matrix.newest_run()["release"]
    assert matrix.release_key(newest) > matrix.release_key(installed), releases
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


def corrections() -> list[dict]:
    """The entries of the Other torch releases page that it says hold on every release: those
    proved by a block of that page and not declared as a change (its facts about the records
    themselves are proved by these tests, which no run records)."""
    return [
        e
        for e in entries()
        if e["page"].startswith("changes.md#")
        and str(e.get("proof", "")).startswith("changes.md#")
        and "changed_since" not in e
    ]


def test_every_change_the_page_shows_is_declared_by_its_entry():
    """The page renders every claim that fails on the oldest release and passes on the pinned
    one as a change between them: each must say so (`changed_since`), so that its section says
    what changed, or the proof must stop depending on the release."""
    installed = torch.__version__.split("+")[0]
    oldest = matrix.runs()[0]["release"]
    undeclared = [
        c["id"] for c in matrix.changed_between(oldest, installed) if "changed_since" not in c
    ]
    assert not undeclared, (
        f"fail on {oldest} and pass on {installed}, with no changed_since: {undeclared}"
    )


def test_the_version_facts_were_recorded_with_the_proofs_on_the_pages_now():
    """The changes the page declares and the corrections it says hold on every release must have
    been run as their proofs stand now: after editing one, run `make test-versions` again."""
    chosen = [e for e in entries() if "changed_since" in e] + corrections()
    now = proof_digests(chosen)
    stale = [
        f"{e['id']} on torch {run['release']}"
        for run in matrix.runs()
        for e in chosen
        if matrix.result(run, e["id"]).get("proof_digest") != now.get(e["id"])
    ]
    assert not stale, "proof edited since its recorded run (make test-versions):\n" + "\n".join(
        stale
    )


def test_a_proofs_digest_follows_its_text_and_a_failing_line_is_named_by_its_fence():
    assert digest(["a", "b"]) == digest(["a", "b"]) != digest(["a", "b "])
    fences = [("x.md", "first", 10), ("x.md", None, 30), ("x.md", "later", 50)]
    assert fence_where("docs/x.md:18", fences) == "x.md#first, line 8 of the block"
    assert fence_where("docs/x.md:55", fences) == "x.md#later, line 5 of the block"
    assert fence_where("docs/x.md:35", fences) == "docs/x.md:35"  # a fence without an id
    assert fence_where("docs/x.md:5", fences) == "docs/x.md:5"
    assert fence_where("tests/t.py::test_x", fences) == "tests/t.py::test_x"


def test_the_corrections_hold_on_every_recorded_release():
    chosen = corrections()
    assert chosen
    problems = [
        f"{e['id']} on torch {run['release']}: {matrix.result(run, e['id'])}"
        for run in matrix.runs()
        for e in chosen
        if matrix.result(run, e["id"])["result"] != "passed"
    ]
    assert not problems, "\n".join(problems)


def test_every_proved_claim_passes_on_the_installed_release_as_recorded():
    run = matrix.run_of(torch.__version__)
    failed = [e["id"] for e in entries() if matrix.result(run, e["id"])["result"] == "failed"]
    assert not failed, f"recorded as failing on the pinned torch: {failed}"


def test_a_run_is_a_plain_pytest_of_the_pages_and_of_every_test_proof(tmp_path, monkeypatch):
    """What `make test-versions` runs in each environment: the pages and every test file a proof
    names, under the markers a plain `pytest` uses (pyproject.toml), but not the tests of these
    records; and what it keeps of the moment it began."""
    ran: list[list[str]] = []
    environments: list[dict[str, str]] = []

    def run(command, **options):
        ran.append(command)
        environments.append(options["env"])
        return subprocess.CompletedProcess(command, 0, "1 passed", "")

    monkeypatch.setattr(recorder.subprocess, "run", run)
    monkeypatch.setattr(recorder, "git", lambda *words: "" if "status" in words else "c0ffee")
    raw = tmp_path / "versions-x.jsonl"
    recorder.run_pytest(Path("python"), raw)
    (command,) = ran
    # unlike a plain pytest: one process, one intra-op thread, the recording plugin
    assert command[command.index("no:xdist") - 1] == "-p"
    assert command[command.index("versions.report") - 1] == "-p"
    assert environments[0]["OMP_NUM_THREADS"] == "1"
    addopts = tomllib.loads((ROOT / "pyproject.toml").read_text("utf8"))["tool"]["pytest"]
    plain = addopts["ini_options"]["addopts"]
    assert command[command.index("-m", 3) + 1] == plain[plain.index("-m") + 1] == recorder.MARKERS
    files = {str(e["proof"]).partition("::")[0] for e in entries() if recorder.is_test(e)}
    assert "docs" in command and set(command) & files == files - {recorder.OF_THE_RECORD}
    began = json.loads(raw.with_suffix(".run.json").read_text("utf8"))
    assert began["commit"] == "c0ffee" and began["uncommitted_changes"] is False
    assert began["started"][:4].isdigit() and set(began["proofs"]) == {
        e["id"] for e in entries() if "proof" in e
    }


def test_the_other_releases_ran_as_cuda_builds_on_a_machine_without_a_gpu():
    """The runs made in environments of their own installed the registry's CUDA builds (the
    local version `+cuNNN`), where torch saw no GPU (the record's `machine`): they ran on the
    CPU."""
    own = [run for run in matrix.runs() if run["command"] != f"{matrix.RECORDER} --torch installed"]
    assert {run["release"] for run in own} == {"2.8.0", matrix.newest_run()["release"]}
    for run in own:
        assert re.fullmatch(r"[\d.]+\+cu\d+", run["torch"]), run["torch"]
        assert run["machine"].endswith("no GPU"), run["machine"]
    assert matrix.builds() == " and ".join(f"`{run['torch']}`" for run in own)


def test_the_newest_run_is_the_one_made_with_a_bare_torch(tmp_path, monkeypatch):
    """The page's newest release is the run of `--torch newest`, whose environment asks pip
    for `torch` with no version, once: a matching stamp reuses it."""
    assert matrix.newest_run() in matrix.runs()  # one of the recorded runs
    assert matrix.newest_run()["command"] == matrix.NEWEST_COMMAND
    assert matrix.value("newest", torch.__version__) == matrix.newest_run()["release"]
    ran: list[list[str]] = []

    def run(command, **options):
        ran.append(command)
        (tmp_path / "torch-newest" / "bin").mkdir(parents=True, exist_ok=True)

    monkeypatch.setattr(recorder, "BUILD", tmp_path)
    monkeypatch.setattr(recorder.subprocess, "run", run)
    recorder.make_environment("newest")
    installs = [c for c in ran if "install" in c and "-e" not in c]
    (words,) = installs
    assert "torch" in words and not any(w.startswith("torch=") for w in words)
    ran.clear()
    recorder.make_environment("newest")  # stamped: reused, nothing installed
    assert ran == []


def test_the_page_names_the_libraries_each_run_recorded(monkeypatch):
    def run(release: str, **libraries: str) -> dict:
        return {"release": release, **libraries}

    same = {"numpy": "2.4.6", "safetensors": "0.8.0"}
    monkeypatch.setattr(matrix, "runs", lambda: [run("2.8.0", **same), run("2.13.0", **same)])
    assert matrix.libraries() == "NumPy 2.4.6 and safetensors 0.8.0 on every release"
    other = {"numpy": "2.3.0", "safetensors": "0.8.0"}
    monkeypatch.setattr(matrix, "runs", lambda: [run("2.8.0", **other), run("2.13.0", **same)])
    assert matrix.libraries() == (
        "on 2.8.0, NumPy 2.3.0 and safetensors 0.8.0; on 2.13.0, NumPy 2.4.6 and safetensors 0.8.0"
    )
    monkeypatch.setattr(matrix, "runs", lambda: [run("2.8.0"), run("2.13.0", **same)])
    assert matrix.libraries() == (
        "on 2.8.0, not recorded; on 2.13.0, NumPy 2.4.6 and safetensors 0.8.0"
    )
    monkeypatch.setattr(matrix, "runs", lambda: [run("2.8.0"), run("2.13.0")])
    assert matrix.libraries() == "not recorded by any run"


def test_a_proofs_digest_covers_its_text_and_includes_not_what_it_calls(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "tests").mkdir()
    (tmp_path / "shown.py").write_text("x = 1\n", "utf8")
    fence = '```{.python #block}\n--8<-- "shown.py"\nassert x == 1\n```\n'
    (tmp_path / "docs" / "p.md").write_text(fence, "utf8")
    test = "def helper():\n    return 1\n\n\ndef test_t():\n    assert helper() == 1\n"
    (tmp_path / "tests" / "t.py").write_text(test, "utf8")
    entries = [{"id": "b", "proof": "p.md#block"}, {"id": "t", "proof": "tests/t.py::test_t"}]
    before = proof_digests(entries, tmp_path)
    (tmp_path / "tests" / "t.py").write_text(test.replace("return 1", "return 2"), "utf8")
    assert proof_digests(entries, tmp_path) == before  # the helper it calls: not covered
    (tmp_path / "shown.py").write_text("x = 2\n", "utf8")
    (tmp_path / "tests" / "t.py").write_text(test.replace("== 1", "== 2"), "utf8")
    after = proof_digests(entries, tmp_path)
    assert set(after) == {"b", "t"} and after["b"] != before["b"] and after["t"] != before["t"]


def test_the_corrections_listed_are_those_of_the_other_pages(monkeypatch):
    claims = [
        {"id": "here", "page": "changes.md#a", "claim": "A.", "corrects": "said a."},
        {"id": "there", "page": "update-loop.md#b", "claim": "B.", "corrects": "said b."},
        {"id": "none", "page": "update-loop.md#b", "claim": "C."},
    ]
    monkeypatch.setattr(ledger_facts, "ledger", lambda: {"claims": claims})
    assert ledger_facts.claims_corrections() == (
        "- The course text: said b. Here: B. ([where](update-loop.md#b))"
    )


def test_every_release_runs_with_the_other_pins_of_the_project():
    pins = recorder.other_pins()
    assert not any(p.startswith("torch==") for p in pins)
    assert {p.split("==")[0] for p in pins} >= {"numpy", "safetensors"}
    assert set(pins) < set((ROOT / "requirements.txt").read_text("utf8").splitlines())


def test_the_record_keeps_when_the_run_began_its_commit_and_each_proofs_digest(
    tmp_path, monkeypatch
):
    raw = tmp_path / "versions-x.jsonl"
    failing = {"node": "docs/x.md::[CodeFence#1][line:3]", "when": "call", "outcome": "failed"}
    failing |= {"where": "docs/x.md:7", "message": "AssertionError"}
    raw.write_text(json.dumps(failing) + "\n", "utf8")
    raw.with_suffix(".fences.json").write_text(json.dumps([["x.md", "bad", 3]]), "utf8")
    began = {"started": "2031-02-03T04:05:06+00:00", "commit": "c0ffee"}
    began |= {"uncommitted_changes": False, "proofs": {"b": "d1"}}
    raw.with_suffix(".run.json").write_text(json.dumps(began), "utf8")
    monkeypatch.setattr(recorder, "RESULTS", tmp_path)
    described = {"torch": "9.9.9", "python": "3", "numpy": "2.0", "safetensors": "0.1"}
    described["cuda"] = "False"  # torch.cuda.is_available() in that environment
    monkeypatch.setattr(recorder, "describe", lambda python: described)
    ledger = [{"id": "b", "status": "make-test", "proof": "x.md#bad"}]
    monkeypatch.setattr(recorder, "ledger", lambda: ledger)
    written = json.loads(recorder.record("installed", raw, "1 failed").read_text("utf8"))
    assert (written["date"], written["commit"]) == ("2031-02-03", "c0ffee")
    assert (written["numpy"], written["safetensors"]) == ("2.0", "0.1")
    assert written["machine"].endswith(", no GPU")
    assert written["claims"]["b"] == {
        "result": "failed",
        "where": "x.md#bad, line 4 of the block",
        "message": "AssertionError",
        "proof_digest": "d1",
    }


def test_the_pages_figures_come_from_the_runs(monkeypatch):
    def run(release: str, **claims: dict) -> dict:
        return {"release": release, "torch": release, "date": "d", "commit": "c0ffee" * 3,
                "claims": claims}  # fmt: skip

    slow = {"result": "not run", "message": "in the slow or full tier"}
    runs = [
        run(
            "2.8.0",
            a={"result": "failed"},
            b={"result": "passed", "proof_digest": "old"},
            c=slow,
            d={"result": "failed", "where": "x.md#q, line 2", "message": "AttributeError: no"},
        ),
        run(
            "2.13.0",
            a={"result": "passed"},
            b={"result": "passed", "proof_digest": "old"},
            c=slow,
            d={"result": "passed"},
        ),
    ]
    ledger = [{"id": i, "proof": "x.md#p"} for i in "abc"]
    ledger.append({"id": "d", "proof": "x.md#q", "requires": "an API 2.8.0 lacks"})
    ledger[3] |= {"claim": "D.", "page": "x.md#d"}
    monkeypatch.setattr(matrix, "runs", lambda: runs)
    monkeypatch.setattr(matrix, "claims", lambda: ledger)
    monkeypatch.setattr(matrix, "proof_digests", lambda claims: {"b": "new"})
    # d fails on 2.8.0 for want of an API: it cannot run there, which is not a change
    assert [c["id"] for c in matrix.changed_between("2.8.0", "2.13.0")] == ["a"]
    assert [c["id"] for c in matrix.cannot_run_on("2.8.0")] == ["d"]
    assert matrix.mark(ledger[3], runs[0]).startswith("cannot run")
    # what it needs (the ledger), where it failed and the message (the run)
    assert matrix.requirement_table("2.8.0").splitlines()[-1] == (
        "| [D](x.md#d) | an API 2.8.0 lacks | `x.md#q, line 2` | `AttributeError: no` |"
    )
    assert matrix.mark(ledger[0], runs[0]) == "**fails**"
    assert matrix.failing_on("2.13.0") == []
    assert matrix.not_run() == "1 in the slow or full tier"
    assert [c["id"] for c in matrix.edited_since()] == ["b"]
    assert matrix.edited_sentence().startswith("Proofs whose text changed since the runs: 1 (or")
    assert matrix.commits() == "`c0ffeec0ffee`"
    # several claims may share a proof: the page names the proofs after the count
    assert matrix.proofs_of(ledger[:1]) == ", proved by `x.md#p`"
    assert matrix.proofs_of(ledger[:2]) == ", both proved by `x.md#p`"
    assert matrix.proofs_of(ledger[:3]) == ", all proved by `x.md#p`"
    assert matrix.proofs_of(ledger) == ", proved by `x.md#p` and `x.md#q`"
    assert matrix.proofs_of([]) == ""
    monkeypatch.setattr(matrix, "proof_digests", lambda claims: {"b": "old"})
    assert matrix.edited_sentence() == "Proofs whose text changed since the runs: none."


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
    deselected = {"id": "d", "status": "make-test-all", "proof": "tests/t.py::test_marked"}
    rows["tests/t.py::test_marked"] = {"outcome": "deselected", "when": "collect"}
    stated = {"id": "t", "status": "stated", "reason": "no GPU"}
    assert verdict(good, nodes_of(good, fences, rows)) == {"result": "passed"}
    assert verdict(bad, nodes_of(bad, fences, rows)) == {
        "result": "failed",
        "where": "docs/x.md:12",
        "message": "AssertionError: 1 != 2",
    }
    at = [("x.md", "good", 3), ("x.md", "bad", 9)]
    assert verdict(bad, nodes_of(bad, fences, rows), at)["where"] == "x.md#bad, line 3 of the block"
    # left out by -m: deselected; absent from pytest's report: not collected
    assert verdict(deselected, nodes_of(deselected, fences, rows)) == {
        "result": "not run",
        "message": recorder.DESELECTED,
    }
    assert verdict(slow, nodes_of(slow, fences, rows)) == {
        "result": "not run",
        "message": "not collected",
    }
    assert verdict(stated, []) == {"result": "stated"}


def test_the_report_plugin_writes_a_line_for_each_deselected_test(tmp_path, monkeypatch):
    from versions import report

    class Item:
        def __init__(self, nodeid: str) -> None:
            self.nodeid = nodeid

    raw = tmp_path / "raw.jsonl"
    monkeypatch.setenv("VERSIONS_REPORT", str(raw))
    report.pytest_deselected([Item("tests/t.py::test_a"), Item("docs/x.md::[line:3]")])
    rows = [json.loads(line) for line in raw.read_text("utf8").splitlines()]
    assert rows == [
        {"node": "tests/t.py::test_a", "when": "collect", "outcome": "deselected"},
        {"node": "docs/x.md::[line:3]", "when": "collect", "outcome": "deselected"},
    ]


def test_the_results_files_are_json_with_a_verdict_per_claim():
    for path in sorted(matrix.RESULTS.glob("torch-*.json")):
        run = json.loads(path.read_text("utf8"))
        assert path.name == f"torch-{run['release']}.json"
        outcomes = {c["result"] for c in run["claims"].values()}
        assert outcomes <= {"passed", "failed", "not run", "skipped", "stated"}, outcomes
