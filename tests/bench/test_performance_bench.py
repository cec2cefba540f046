"""The performance benchmark: its results hold numbers only, and the page's claims follow from them.

No timing is asserted here: the targets are judged from a real run's numbers, and the sentences
that compare are checked against the runs with the rules written out again below.
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path
from typing import Any

import pytest
from quoted_results import quoted_paths, unresolved

from bench import __main__ as runner
from bench import views

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "docs" / "assets" / "bench" / "performance.json"
PAGE = ROOT / "docs" / "performance.md"
SECTIONS = ("plan", "provenance", "sampler", "save", "hashing", "verify_load", "loop", "suite")
TABLES = ("table_md", "sampler_table_md", "save_table_md", "hash_table_md", "load_table_md")
HASHES = ("blake3", "sha256")
MACHINE = ("cpu", "cores", "ram_gib", "os", "scratch_fs")
VERSIONS = ("torch", "numpy", "safetensors", "python")
TARGETS = (
    "sampler_flat",
    "sampler_speedup",
    "save_overhead",
    "verify_throughput",
    "load_peak",
    "loop_throughput",
    "suite_make_test",
    "suite_contract",
)
LOAD_PATHS = ("meta_mmap", "plain", "load_checkpoint")
TOO_NOISY = "too noisy to judge"
# The only strings a results file may hold: names, identifiers and timestamps, never words.
NAME = re.compile(r"[A-Za-z0-9_.+:\-() ]{1,80}")
STRINGS = (
    r"provenance\.(started|mode|machine\.\w+|versions\.\w+)",
    r"plan\.(mode|(save_sizes|serialization_sizes|distributed_save_sizes)\..*)",
    r"save\.\w+\.default_hash",
    r"verify_load\.hash",
    r"suite\.(reason|finished)",
    r"sizes\.\w+",  # serialization.json: none, but its keys are names
)


def only_numbers(value: Any, where: str = "") -> list[str]:
    """Where a results file holds something other than a number, a flag or an allowed name."""
    found = []
    if isinstance(value, dict):
        for key, inner in value.items():
            # a key is a name, or a folder's path (suite time by folder: tests/lab)
            assert re.fullmatch(r"[a-z0-9_]+(/[a-z0-9_]+)*", key), f"{where}.{key}"
            found += only_numbers(inner, f"{where}.{key}".lstrip("."))
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            found += only_numbers(inner, f"{where}.{i}")
    elif isinstance(value, str):
        allowed = any(re.fullmatch(pattern, where) for pattern in STRINGS)
        if not allowed or not NAME.fullmatch(value):
            found.append(f"{where}: {value[:60]!r}")
    elif not isinstance(value, int | float | None):
        found.append(f"{where}: {type(value).__name__}")
    return found


def check_stored(results: dict) -> None:
    """A results file: the sections, provenance, and numbers only (no Markdown, no sentences)."""
    assert set(results) == set(SECTIONS)
    prov = results["provenance"]
    assert set(prov["machine"]) >= set(MACHINE) and set(prov["versions"]) >= set(VERSIONS)
    assert prov["machine"]["cores"] >= 1 and prov["machine"]["cpu"]
    assert len(prov["load_average_start"]) == len(prov["load_average_end"]) == 3
    assert prov["duration_s"] > 0
    assert not only_numbers(results)


def check_view(shown: dict) -> None:
    """What the page is built from: derived figures, targets, sentences and tables."""
    targets = shown["targets"]
    assert set(targets) == set(TARGETS)
    for key, target in targets.items():
        assert set(target) >= {"what", "target", "threshold", "measured", "met", "verdict"}, key
        assert target["met"] in (True, False, None), key
        if target["met"] is None:  # not measured, or measured but too noisy to judge
            assert (target["measured"] is None) == (target["verdict"] != TOO_NOISY), key
    sampler = shown["sampler"]
    assert [e["k"] for e in sampler["per_k"].values()] == sampler["ks"]
    for entry in sampler["per_k"].values():
        assert set(entry["median_s"]) == {"start", "replay", "cold_start", "cold_replay"}
        assert all(m > 0 for m in entry["median_s"].values())
    assert list(shown["hashing"]) == list(shown["save"])
    for key, size in shown["save"].items():
        assert set(size["median_s"]) == {"floor", "inline", *(f"save_{a}" for a in HASHES)}
        assert size["file_bytes"] > 0 and size["ratio"] > 0 and size["default_hash"] in HASHES
        rates = shown["hashing"][key]["gb_per_s"]
        assert {f"memory_{a}" for a in HASHES} | {f"file_{a}" for a in HASHES} <= set(rates)
        assert all(rate > 0 for rate in rates.values())
    load = shown["verify_load"]
    assert set(load["paths"]) == set(LOAD_PATHS) and load["model_bytes"] > 0
    assert all(p["peak_extra_bytes"] >= 0 for p in load["paths"].values())
    assert load["verify"]["gb_per_s"] > 0
    loop = shown["loop"]
    assert loop["bitwise_equal"] is True  # the bare loop does the Trainer's arithmetic
    assert set(loop["median_s"]) == {"trainer", "trainer_with_saves", "bare"}
    assert all(isinstance(v, str) for v in shown["headline"].values())
    for table in TABLES:
        lines = shown[table].splitlines()
        assert len(lines) >= 3 and all(line.startswith("|") for line in lines), table


@pytest.mark.heavy  # a whole quick benchmark run
def test_quick_run_writes_numbers_outside_the_repo(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(runner.tempfile, "tempdir", str(tmp_path))  # where --quick writes
    committed_before = COMMITTED.stat().st_mtime_ns

    assert runner.main(["--quick", "--only", "performance"]) == 0

    # --quick without --out never replaces the committed results.
    assert COMMITTED.stat().st_mtime_ns == committed_before
    (out,) = tmp_path.glob("bench-quick-*")
    results = json.loads((out / "performance.json").read_text("utf8"))
    check_stored(results)
    check_view(views.view("performance", results))
    assert results["provenance"]["mode"] == "quick"
    assert results["suite"] == {"measured": False, "reason": "quick"}  # it would run this test
    shown = views.view("performance", results)
    assert shown["targets"]["suite_make_test"]["verdict"] == "not measured"
    # The scratch files of the measurement are gone; only the results remain.
    assert [p.name for p in tmp_path.glob("bench-*")] == [out.name]
    assert [p.name for p in out.iterdir()] == ["performance.json"]


def test_suite_only_times_the_suite_alone_into_the_stored_results(tmp_path: Path, monkeypatch):
    """'`--suite-only` times the test suite alone': no other measurement runs, and of the
    stored file only the suite's entry (with its own date) changes."""
    before = json.loads(COMMITTED.read_text("utf8"))
    runner.results.write(tmp_path, "performance", before)
    later = before["suite"] | {"finished": "2027-01-01T00:00:00+00:00"}
    timed: list[Any] = []
    monkeypatch.setattr(runner.suite_time, "measure", lambda plan: timed.append(plan) or later)
    for measurements in runner.MEASUREMENTS.values():
        for _, module in measurements:
            monkeypatch.setattr(module, "measure", lambda plan: pytest.fail("measured"))

    assert runner.main(["--suite-only", "--out", str(tmp_path)]) == 0

    assert len(timed) == 1
    assert runner.results.read(tmp_path, "performance") == before | {"suite": later}


@pytest.fixture(scope="module")
def committed() -> dict:
    assert COMMITTED.exists(), "run `make bench` to measure and write the results"
    return json.loads(COMMITTED.read_text("utf8"))


@pytest.fixture(scope="module")
def shown(committed: dict) -> dict:
    return views.view("performance", committed)


def test_committed_results_are_a_full_run_of_numbers(committed: dict, shown: dict):
    check_stored(committed)
    check_view(shown)
    assert committed["provenance"]["mode"] == "full"
    sampler = committed["sampler"]
    assert sampler["examples"] == 1_000_000 and sampler["ks"][-1] == 100_000
    assert max(s["file_bytes"] for s in committed["save"].values()) >= 10**9
    assert committed["verify_load"]["model_bytes"] >= 10**9
    assert committed["verify_load"]["fresh_process_per_load"] is True
    # While `make bench` times the suite, the suite it runs reads this file with the suite pending.
    suite = committed["suite"]
    assert suite["measured"] is True or suite["reason"] == "pending", suite
    measured = {key: t for key, t in shown["targets"].items() if not key.startswith("suite")}
    # every target was judged, or its floor spread by more than its margin
    for key, t in measured.items():
        assert t["met"] is not None or t["floor_spread"] > t["margin"], key


def test_no_results_file_holds_words():
    """Every results file under docs/assets/bench/ that the benchmarks write."""
    for name in runner.MEASUREMENTS:
        stored = json.loads((COMMITTED.parent / f"{name}.json").read_text("utf8"))
        assert not only_numbers(stored), name
        assert not [k for k in stored if k.endswith("_md") or k == "headline"], name


def test_the_numbers_only_check_can_fail():
    assert only_numbers({"table_md": "| a | b |"})
    assert only_numbers({"provenance": {"summary": "AMD EPYC (2 cores), torch 2.13; load 4"}})
    assert only_numbers({"save": {"mb_10": {"default_hash": "blake3 was faster | x"}}})
    assert not only_numbers({"save": {"mb_10": {"default_hash": "blake3", "runs_s": [0.1]}}})


def test_every_number_the_page_quotes_is_in_the_committed_results(shown: dict):
    assert quoted_paths(PAGE, "performance"), "the page quotes no benchmark results"
    assert not unresolved(PAGE, "performance", shown)


def lower_beyond_noise(a: list[float], b: list[float]) -> bool:
    """The page's rule for "A beats B": A's slowest run beats B's fastest."""
    return max(a) < min(b)


def winner(runs: dict[str, list[float]], a: str, b: str) -> str | None:
    if lower_beyond_noise(runs[a], runs[b]):
        return a
    if lower_beyond_noise(runs[b], runs[a]):
        return b
    return None


def test_the_committed_numbers_support_what_the_page_says(committed: dict, shown: dict):
    """The page's sentences about the measurements, checked against the stored runs: a
    sentence names a winner only when the runs separate, and a target is met, missed or too
    noisy to judge as the runs say."""
    sampler = committed["sampler"]
    # "starting at k is flat": no k's fastest start beyond the flatness threshold times the
    # smallest k's slowest (else the page says "not flat")
    first = next(iter(sampler["per_k"].values()))["runs_s"]["start"]
    limit = shown["targets"]["sampler_flat"]["threshold"] * max(first)
    flat = all(min(e["runs_s"]["start"]) <= limit for e in sampler["per_k"].values())
    assert shown["headline"]["sampler_shape"].startswith("at no k") == flat
    # "a replay grows with k"
    replays = [e["median_s"]["replay"] for e in sampler["per_k"].values()]
    assert replays == sorted(replays)
    # "cold, a fresh sampler on both paths pays for drawing the order, so the gap is smaller"
    last = list(sampler["per_k"].values())[-1]["median_s"]
    warm, cold = last["replay"] / last["start"], last["cold_replay"] / last["cold_start"]
    assert 1 < cold < warm
    # "the start was faster than the replay", warm and cold, at every k: only if its runs
    # beat the replay's (the summary table's "faster" and the section's sentences)
    for key, entry in sampler["per_k"].items():
        for c in shown["sampler"]["per_k"][key]["compare"].values():
            assert c["winner"] == winner(entry["runs_s"], c["a"], c["b"]), (key, c)
    for sentence, when in (("start_vs_replay", "warm"), ("cold_start_vs_replay", "cold")):
        c = shown["sampler"]["compare"][when]
        assert (" was faster than " in shown["headline"][sentence]) == (c["winner"] is not None)
        row = shown["table_md"].split("\n")[{"warm": 2, "cold": 4}[when]]  # the summary's
        assert (" faster |" in row) == (c["winner"] == c["a"]), row

    # Every comparison the page words ("was faster than" / "within noise"), from the raw runs.
    for key, size in committed["save"].items():
        runs = size["runs_s"]
        for c in shown["save"][key]["compare"].values():
            assert c["winner"] == winner(runs, c["a"], c["b"]), (key, c)
        hashed = committed["hashing"][key]["runs_s"]
        for c in shown["hashing"][key]["compare"].values():
            assert c["winner"] == winner(hashed, c["a"], c["b"]), (key, c)
    load = committed["verify_load"]
    peaks = {how: [r["peak_extra_bytes"] for r in p["runs"]] for how, p in load["paths"].items()}
    for c in shown["verify_load"]["compare"].values():
        assert c["winner"] == winner(peaks, c["a"], c["b"]), c
    headline = shown["headline"]
    for sentence in ("save_vs_floor_largest", "helper_vs_inline_largest", "lab_vs_plain"):
        named = " than " in headline[sentence]
        assert named != ("within noise" in headline[sentence]), sentence
    largest_key = list(committed["save"])[-1]
    helper = winner(committed["save"][largest_key]["runs_s"], "save_blake3", "inline")
    assert ("within noise" in headline["helper_vs_inline_largest"]) == (helper is None)

    # The save target: judged at the largest size, unless the floor spread beyond its margin.
    largest = committed["save"][largest_key]
    floor = largest["runs_s"]["floor"]
    spread = (max(floor) - min(floor)) / statistics.median(floor)
    save = shown["targets"]["save_overhead"]
    ratio = largest["median_s"]["save_blake3"] / statistics.median(floor)
    if spread > save["threshold"] - 1:
        assert save["met"] is None and save["verdict"] == TOO_NOISY
    else:
        assert save["met"] == (ratio <= save["threshold"])

    # "The default is BLAKE3, and this run supports it: ...": only if it hashed faster in
    # memory beyond noise at some size and SHA-256 was never faster beyond noise, in memory,
    # from the file or while saving.
    choice = shown["hash_choice"]
    default = choice["default"]
    other = next(a for a in HASHES if a != default)
    memory = [
        winner(h["runs_s"], f"memory_{default}", f"memory_{other}")
        for h in committed["hashing"].values()
    ]
    saving = [
        winner(size["runs_s"], f"save_{default}", f"save_{other}")
        for size in committed["save"].values()
    ]
    from_file = [
        winner(h["runs_s"], f"file_{default}", f"file_{other}")
        for h in committed["hashing"].values()
    ]
    contradicted = (
        f"memory_{other}" in memory or f"file_{other}" in from_file or f"save_{other}" in saving
    )
    assert choice["contradicted"] == contradicted
    assert choice["supported"] == (f"memory_{default}" in memory and not contradicted)
    assert ("and this run supports it" in choice["sentence"]) == choice["supported"]
    assert ("does not support" in choice["sentence"]) == contradicted
    if None in memory:
        assert "within noise" in choice["sentence"]

    paths = load["paths"]
    state = load["model_bytes"]
    # "the lab's load_checkpoint holds one copy at its peak, the plain load two"
    lab_worst = max(r["peak_extra_bytes"] for r in paths["load_checkpoint"]["runs"]) / state
    assert lab_worst < 1.5 < paths["plain"]["peak_extra_bytes"] / state
    # "the mapped model's pages are file-backed, not anonymous memory"
    meta = paths["meta_mmap"]
    assert meta["rss_file_extra_bytes"] > 10 * max(meta["rss_anon_extra_bytes"], 1)
    loop = committed["loop"]["median_s"]
    assert loop["trainer_with_saves"] >= loop["trainer"]  # writing checkpoints is never free


def test_a_comparison_whose_winner_measured_zero_has_no_factor():
    """A peak of memory can be zero (nothing grew above the baseline): the comparison still
    names the winner, and states no factor rather than dividing by zero."""
    from bench.timing import compare

    found = compare({"meta_mmap": [270336.0], "plain": [0.0]}, "meta_mmap", "plain")
    assert (found["winner"], found["loser"], found["factor"]) == ("plain", "meta_mmap", None)
    assert compare({"a": [1.0], "b": [3.0, 5.0]}, "a", "b")["factor"] == 4.0


def test_the_suite_report_is_read_as_pytest_and_xdist_print_it():
    """`make test` runs on xdist workers: the suite's bench reads how many, and each folder's
    summed time, from the output as printed."""
    from bench.measurements import suite_time

    output = """created: 2/2 workers
2 workers [752 items]
30.64s setup    tests/browser/test_pages.py::test_x[index.html]
2.50s call     docs/lab.md::[CodeFence#3][line:12]
1.50s call     tests/browser/test_search.py::test_y
================= 752 passed in 157.05s (0:02:37) ================="""
    assert suite_time.workers(output) == 2
    assert suite_time.workers("752 passed in 200.00s") == 1
    assert suite_time.time_by_folder(output) == {"tests/browser": 32.1, "docs": 2.5}
    summary = suite_time.PYTEST_SUMMARY.match(output.splitlines()[-1])
    assert summary and summary["seconds"] == "157.05"
