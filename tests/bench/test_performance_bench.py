"""The performance benchmark: its output's shape, and the committed results the page quotes.

No timing is asserted here: the targets are checked by the benchmark itself, on a real run.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest
from quoted_results import quoted_paths, unresolved

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "performance.py"
COMMITTED = ROOT / "docs" / "assets" / "bench" / "performance.json"
PAGE = ROOT / "docs" / "performance.md"
SECTIONS = ("sampler", "save", "verify_load", "loop", "suite", "targets")
TABLES = ("table_md", "sampler_table_md", "save_table_md", "load_table_md")
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
            skipped = ("runs_s", "median_s", "best_s", "by_folder_s", "plan", "notes")
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
        assert (target["met"] is None) == (target["measured"] is None), key
    measured = [t["met"] for t in targets.values() if t["met"] is not None]
    assert results["all_met"] == all(measured)

    sampler = results["sampler"]
    assert [e["k"] for e in sampler["per_k"].values()] == sampler["ks"]
    for entry in sampler["per_k"].values():
        assert set(entry["median_s"]) == {"start", "replay", "cold_start", "cold_replay"}
        assert all(m > 0 for m in entry["median_s"].values())
    for size in results["save"].values():
        assert set(size["median_s"]) == {"floor", "inline_hash", "atomic_save", "save_checkpoint"}
        assert size["file_bytes"] > 0 and size["ratio"] > 0
    load = results["verify_load"]
    assert set(load["paths"]) == set(LOAD_PATHS) and load["model_bytes"] > 0
    assert all(p["peak_extra_bytes"] >= 0 for p in load["paths"].values())
    assert load["hashing"]["gb_per_s"]["verify"] > 0
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
    assert all(t["met"] is not None for t in measured.values())


def test_every_number_the_page_quotes_is_in_the_committed_results(committed: dict):
    assert quoted_paths(PAGE, "performance"), "the page quotes no benchmark results"
    assert not unresolved(PAGE, "performance", committed)


def test_the_committed_numbers_support_what_the_page_says(committed: dict):
    """The page's sentences about the measurements, checked against the measurements."""
    sampler = committed["sampler"]
    # "starting at k costs the same at every k": within the flatness target at every k
    starts = [e["median_s"]["start"] for e in sampler["per_k"].values()]
    assert max(starts) <= committed["targets"]["sampler_flat"]["threshold"] * min(starts)
    # "a replay grows with k"
    replays = [e["median_s"]["replay"] for e in sampler["per_k"].values()]
    assert replays == sorted(replays)
    # "in a fresh process both pay for drawing the order, so the gap is smaller"
    assert 1 < sampler["cold_speedup"] < sampler["speedup"]
    # "hashing in a helper thread beats hashing in line" (at the largest size, where it matters)
    largest = list(committed["save"].values())[-1]
    assert largest["ratio_atomic_save"] < largest["ratio_inline_hash"]
    paths = committed["verify_load"]["paths"]
    # "the plain load holds two copies at its peak, the lab's load_checkpoint three"
    assert paths["meta_mmap"]["peak_ratio"] < paths["plain"]["peak_ratio"]
    assert paths["plain"]["peak_ratio"] < paths["load_checkpoint"]["peak_ratio"]
    # "the mapped model's pages are file-backed, not anonymous memory"
    meta = paths["meta_mmap"]
    assert meta["rss_file_extra_bytes"] > 10 * max(meta["rss_anon_extra_bytes"], 1)
    # "atomic_save alone costs less than with its manifest" is not claimed; the loop's is:
    loop = committed["loop"]
    assert loop["ratio_with_saves"] <= loop["ratio"]  # writing best.pt is never free
