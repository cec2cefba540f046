"""The performance benchmark: its output's shape, and the committed results the page quotes.

No timing is asserted here: the targets are checked by the benchmark itself, on a real run.
"""

from __future__ import annotations

import importlib.util
import json
import re
import statistics
import sys
from pathlib import Path

import pytest
from quoted_results import quoted_paths, unresolved

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "performance.py"
COMMITTED = ROOT / "docs" / "assets" / "bench" / "performance.json"
PAGE = ROOT / "docs" / "performance.md"
SECTIONS = ("sampler", "save", "hashing", "verify_load", "loop", "suite", "targets")
TABLES = ("table_md", "sampler_table_md", "save_table_md", "hash_table_md", "load_table_md")
HASHES = ("blake3", "sha256")
PROVENANCE = (
    "date",
    "timestamp",
    "mode",
    "plan",
    "machine",
    "versions",
    "load_average_start",
    "load_average_end",
    "load_average",
    "duration_s",
    "notes",
    "summary",
)
MACHINE = ("cpu", "cores", "ram_gib", "os", "torch_threads", "scratch_fs")
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


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_performance", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def keys_are_page_safe(value, where: str = "") -> None:
    """Every key a page can name is [a-z0-9_] (what {{ bench.FILE.KEY }} accepts)."""
    if isinstance(value, dict):
        for key, inner in value.items():
            skipped = ("runs_s", "median_s", "best_s", "by_folder_s", "plan", "notes", "compare")
            if where.endswith(skipped) or "runs" in where:
                continue
            assert re.fullmatch(r"[a-z0-9_]+", key), f"{where}.{key}"
            keys_are_page_safe(inner, f"{where}.{key}")


def check_structure(results: dict) -> None:
    assert set(results) >= {"provenance", "headline", *SECTIONS, *TABLES, "all_met"}
    prov = results["provenance"]
    assert set(prov) >= set(PROVENANCE)
    assert set(prov["machine"]) >= set(MACHINE) and set(prov["versions"]) == set(VERSIONS)
    assert prov["machine"]["cores"] >= 1 and prov["machine"]["cpu"]
    assert len(prov["load_average_start"]) == len(prov["load_average_end"]) == 3
    keys_are_page_safe(results)

    targets = results["targets"]
    assert set(targets) == set(TARGETS)
    for key, target in targets.items():
        assert set(target) >= {"what", "target", "threshold", "measured", "met", "verdict"}, key
        assert target["met"] in (True, False, None), key
        if target["met"] is None:  # not measured, or measured but too noisy to judge
            assert (target["measured"] is None) == (target["verdict"] != TOO_NOISY), key
    measured = [t["met"] for t in targets.values() if t["met"] is not None]
    assert results["all_met"] == all(measured)

    sampler = results["sampler"]
    assert [e["k"] for e in sampler["per_k"].values()] == sampler["ks"]
    for entry in sampler["per_k"].values():
        assert set(entry["median_s"]) == {"start", "replay", "cold_start", "cold_replay"}
        assert all(m > 0 for m in entry["median_s"].values())
    assert list(results["hashing"]) == list(results["save"])
    for key, size in results["save"].items():
        saves = {f"save_{a}" for a in HASHES}
        assert set(size["median_s"]) == {"floor", "inline", *saves}
        assert size["file_bytes"] > 0 and size["ratio"] > 0 and size["default_hash"] in HASHES
        rates = results["hashing"][key]["gb_per_s"]
        assert {f"memory_{a}" for a in HASHES} | {f"file_{a}" for a in HASHES} <= set(rates)
        assert all(rate > 0 for rate in rates.values())
    load = results["verify_load"]
    assert set(load["paths"]) == set(LOAD_PATHS) and load["model_bytes"] > 0
    assert all(p["peak_extra_bytes"] >= 0 for p in load["paths"].values())
    assert load["verify"]["gb_per_s"] > 0
    loop = results["loop"]
    assert loop["bitwise_equal"] is True  # the bare loop does the Trainer's arithmetic
    assert set(loop["median_s"]) == {"trainer", "trainer_with_saves", "bare"}
    assert all(isinstance(v, str) for v in results["headline"].values())
    for table in TABLES:
        lines = results[table].splitlines()
        assert len(lines) >= 3 and all(line.startswith("|") for line in lines), table


def test_quick_run_writes_results_outside_the_repo(tmp_path: Path, monkeypatch):
    bench = load_bench()
    monkeypatch.setattr(bench.tempfile, "tempdir", str(tmp_path))  # where --quick writes
    committed_before = COMMITTED.stat().st_mtime_ns if COMMITTED.exists() else None

    assert bench.main(["--quick"]) == 0

    # --quick without --out never replaces the committed results.
    assert (COMMITTED.stat().st_mtime_ns if COMMITTED.exists() else None) == committed_before
    (out,) = tmp_path.glob("bench-performance-quick-*")
    results = json.loads((out / "performance.json").read_text("utf8"))
    check_structure(results)
    assert results["provenance"]["mode"] == "quick"
    assert results["suite"]["measured"] is False  # the suite would run this very test
    assert results["targets"]["suite_make_test"]["verdict"] == "not measured"
    # The scratch files of the measurement are gone; only the results remain.
    assert [p.name for p in tmp_path.glob("bench-*")] == [out.name]
    assert [p.name for p in out.iterdir()] == ["performance.json"]


@pytest.fixture(scope="module")
def committed() -> dict:
    assert COMMITTED.exists(), "run `make bench` to measure and write the results"
    return json.loads(COMMITTED.read_text("utf8"))


def test_committed_results_are_a_full_run(committed: dict):
    check_structure(committed)
    assert committed["provenance"]["mode"] == "full"
    assert (
        committed["sampler"]["examples"] == 1_000_000 and committed["sampler"]["ks"][-1] == 100_000
    )
    assert max(s["file_bytes"] for s in committed["save"].values()) >= 10**9
    assert committed["verify_load"]["model_bytes"] >= 10**9
    assert committed["verify_load"]["fresh_process_per_load"] is True
    # While `make bench` times the suite, the suite it runs reads this file with the suite pending.
    suite = committed["suite"]
    assert suite["measured"] is True or suite["why"].startswith("pending"), suite
    measured = {key: t for key, t in committed["targets"].items() if not key.startswith("suite")}
    # every target was judged, or its floor spread by more than its margin
    for key, t in measured.items():
        assert t["met"] is not None or t["floor_spread"] > t["margin"], key


def test_every_number_the_page_quotes_is_in_the_committed_results(committed: dict):
    assert quoted_paths(PAGE, "performance"), "the page quotes no benchmark results"
    assert not unresolved(PAGE, "performance", committed)


def lower_beyond_noise(a: list[float], b: list[float]) -> bool:
    """The page's rule for "A beats B": A's slowest run beats B's fastest."""
    return max(a) < min(b)


def winner(runs: dict[str, list[float]], a: str, b: str) -> str | None:
    if lower_beyond_noise(runs[a], runs[b]):
        return a
    if lower_beyond_noise(runs[b], runs[a]):
        return b
    return None


def test_the_committed_numbers_support_what_the_page_says(committed: dict):
    """The page's sentences about the measurements, checked against the runs themselves: a
    sentence names a winner only when the runs separate, and a target is met, missed or too
    noisy to judge as the runs say."""
    sampler = committed["sampler"]
    # "starting at k is flat": no k's fastest start beyond the flatness threshold times the
    # smallest k's slowest (else the page says "not flat")
    first = next(iter(sampler["per_k"].values()))["runs_s"]["start"]
    limit = committed["targets"]["sampler_flat"]["threshold"] * max(first)
    flat = all(min(e["runs_s"]["start"]) <= limit for e in sampler["per_k"].values())
    assert (committed["headline"]["sampler_shape"] == "flat") == flat
    # "a replay grows with k"
    replays = [e["median_s"]["replay"] for e in sampler["per_k"].values()]
    assert replays == sorted(replays)
    # "in a fresh process both pay for drawing the order, so the gap is smaller"
    assert 1 < sampler["cold_speedup"] < sampler["speedup"]

    # Every comparison the page words ("was faster than" / "within noise") from the runs.
    for key, size in committed["save"].items():
        runs = size["runs_s"]
        for c in size["compare"].values():
            assert c["winner"] == winner(runs, c["a"], c["b"]), (key, c)
        memory = committed["hashing"][key]["runs_s"]
        for c in committed["hashing"][key]["compare"].values():
            assert c["winner"] == winner(memory, c["a"], c["b"]), (key, c)
    load = committed["verify_load"]
    peaks = {how: [r["peak_extra_bytes"] for r in p["runs"]] for how, p in load["paths"].items()}
    for c in load["compare"].values():
        assert c["winner"] == winner(peaks, c["a"], c["b"]), c
    headline = committed["headline"]
    for sentence in ("save_vs_floor_largest", "helper_vs_inline_largest", "lab_vs_plain"):
        named = " than " in headline[sentence]
        assert named != ("within noise" in headline[sentence]), sentence

    # The save target: judged at the largest size, unless the floor spread beyond its margin.
    largest = list(committed["save"].values())[-1]
    floor = largest["runs_s"]["floor"]
    spread = (max(floor) - min(floor)) / statistics.median(floor)
    save = committed["targets"]["save_overhead"]
    if spread > save["threshold"] - 1:
        assert save["met"] is None and save["verdict"] == TOO_NOISY
    else:
        assert save["met"] == (largest["ratio"] <= save["threshold"])

    # "BLAKE3 is the default because ...": only if it hashed faster in memory beyond noise at
    # some size and SHA-256 was never faster beyond noise, in memory or while saving.
    choice = committed["hash_choice"]
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
    contradicted = f"memory_{other}" in memory or f"save_{other}" in saving
    assert choice["contradicted"] == contradicted
    assert choice["supported"] == (f"memory_{default}" in memory and not contradicted)
    assert ("is the default because" in choice["sentence"]) == choice["supported"]
    assert ("does not support" in choice["sentence"]) == contradicted
    if None in memory:
        assert "within noise" in choice["sentence"]

    paths = load["paths"]
    # "the lab's load_checkpoint holds one copy at its peak, the plain load two"
    assert paths["load_checkpoint"]["peak_ratio_max"] < 1.5 < paths["plain"]["peak_ratio"]
    # "the mapped model's pages are file-backed, not anonymous memory"
    meta = paths["meta_mmap"]
    assert meta["rss_file_extra_bytes"] > 10 * max(meta["rss_anon_extra_bytes"], 1)
    loop = committed["loop"]
    assert loop["ratio_with_saves"] <= loop["ratio"]  # writing checkpoints is never free
