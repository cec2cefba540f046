"""The serialization benchmark: its output's shape, and the committed results the page quotes."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest
from quoted_results import quoted_paths, unresolved

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "serialization.py"
COMMITTED = ROOT / "docs" / "assets" / "bench" / "serialization.json"
PAGE = ROOT / "docs" / "safetensors.md"
OPERATIONS = ("save", "eager_load", "lazy_open", "one_tensor")
PROVENANCE = (
    "date",
    "timestamp",
    "mode",
    "repeats",
    "machine",
    "versions",
    "page_cache",
    "summary",
)
MACHINE = ("cpu", "cores", "ram_gib", "os", "torch_threads", "scratch_fs")
VERSIONS = ("torch", "numpy", "safetensors", "python")


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_serialization", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_structure(results: dict) -> None:
    assert set(results) >= {"provenance", "sizes", "headline", "table_md"}
    prov = results["provenance"]
    assert set(prov) >= set(PROVENANCE)
    assert set(prov["machine"]) >= set(MACHINE) and set(prov["versions"]) == set(VERSIONS)
    assert prov["machine"]["cores"] >= 1 and prov["machine"]["cpu"]
    for key, size in results["sizes"].items():
        assert re.fullmatch(r"[a-z0-9_]+", key), key
        assert size["raw_bytes"] > 0 and size["tensors"] > 1
        for fmt in ("torch", "safetensors"):
            assert size["file_bytes"][fmt] == size["raw_bytes"] + size["overhead_bytes"][fmt]
        for op in OPERATIONS:
            medians, runs = size[op]["median_s"], size[op]["runs_s"]
            assert medians.keys() == runs.keys()
            assert all(len(r) == prov["repeats"] for r in runs.values())
            assert all(m > 0 for m in medians.values()) and size[op]["ratio"] > 0
    # Lazy is never compared with eager: each operation pairs variants of one kind only.
    assert set(size["eager_load"]["median_s"]) == {"torch", "safetensors"}
    assert set(size["lazy_open"]["median_s"]) == {"torch", "safetensors"}
    assert all(isinstance(v, str) for v in results["headline"].values())
    table = results["table_md"].splitlines()
    assert table[0].startswith("| operation |") and all(line.startswith("|") for line in table)


def test_quick_run_writes_results_and_plot_outside_the_repo(tmp_path: Path, monkeypatch):
    bench = load_bench()
    tiny = (("kib_16", "16 KiB", 16 * 1024, 4), ("kib_64", "64 KiB", 64 * 1024, 4))
    monkeypatch.setattr(bench, "QUICK_SIZES", tiny)
    monkeypatch.setattr(bench, "QUICK_REPEATS", 1)
    monkeypatch.setattr(bench.tempfile, "tempdir", str(tmp_path))  # where --quick writes
    committed_before = COMMITTED.stat().st_mtime_ns if COMMITTED.exists() else None

    assert bench.main(["--quick"]) == 0

    # --quick without --out never replaces the committed results.
    assert (COMMITTED.stat().st_mtime_ns if COMMITTED.exists() else None) == committed_before
    (out,) = tmp_path.glob("bench-serialization-quick-*")
    results = json.loads((out / "serialization.json").read_text("utf8"))
    check_structure(results)
    assert results["provenance"]["mode"] == "quick" and list(results["sizes"]) == [
        "kib_16",
        "kib_64",
    ]
    assert (out / "serialization.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The scratch files of the measurement are gone; only the two results files remain.
    assert not list(tmp_path.glob("bench-serialization-[!q]*"))


@pytest.fixture(scope="module")
def committed() -> dict:
    assert COMMITTED.exists(), "run `make bench` to measure and write the results"
    return json.loads(COMMITTED.read_text("utf8"))


def test_committed_results_are_a_full_run(committed: dict):
    check_structure(committed)
    assert committed["provenance"]["mode"] == "full"
    assert (COMMITTED.parent / "serialization.png").exists()
    assert max(s["raw_bytes"] for s in committed["sizes"].values()) >= 1 << 30


def test_every_number_the_page_quotes_is_in_the_committed_results(committed: dict):
    assert quoted_paths(PAGE, "serialization"), "the page quotes no benchmark results"
    assert not unresolved(PAGE, "serialization", committed)


def test_the_committed_numbers_support_what_the_page_says(committed: dict):
    """The page's sentences about the measurements, checked against the measurements."""
    sizes = list(committed["sizes"].values())
    # "torch.save was slower than save_file at every size"
    assert all(s["save"]["ratio"] > 1 for s in sizes)
    # "opening lazily costs about the same whatever the file's size"
    for fmt in ("torch", "safetensors"):
        opens = [s["lazy_open"]["median_s"][fmt] for s in sizes]
        assert max(opens) < 4 * min(opens), (fmt, opens)
    # "do not load the whole file for one tensor": a full torch.load is slower at every size
    assert all(s["one_tensor"]["ratio_full"] > 1 for s in sizes)
    # "the eager safetensors load was faster at every size below the largest, by the widest
    # margin on the smallest files, and at the largest the two were within a factor of two"
    eager = [s["eager_load"]["ratio"] for s in sizes]
    assert all(r > 1 for r in eager[:-1]) and max(eager) == eager[0], eager
    assert 0.5 < eager[-1] < 2, eager
    # safetensors adds fewer bytes than torch.save at every size
    assert all(s["overhead_bytes"]["safetensors"] < s["overhead_bytes"]["torch"] for s in sizes)
