"""The serialization benchmark: numbers only in its results; the page's claims follow from them."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
from quoted_results import quoted_paths, unresolved

from bench import __main__ as runner
from bench import views
from bench.plan import QUICK

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "docs" / "assets" / "bench" / "serialization.json"
PAGE = ROOT / "docs" / "safetensors.md"
OPERATIONS = ("save", "eager_load", "lazy_open", "one_tensor")
MACHINE = ("cpu", "cores", "ram_gib", "os", "scratch_fs")
VERSIONS = ("torch", "numpy", "safetensors", "python")


def check_structure(results: dict) -> None:
    assert set(results) == {"plan", "provenance", "sizes"}
    prov, repeats = results["provenance"], results["plan"]["serialization_repeats"]
    assert set(prov["machine"]) >= set(MACHINE) and set(prov["versions"]) >= set(VERSIONS)
    assert prov["machine"]["cores"] >= 1 and prov["machine"]["cpu"]
    for key, size in results["sizes"].items():
        assert re.fullmatch(r"[a-z0-9_]+", key), key
        assert size["raw_bytes"] > 0 and size["tensors"] > 1
        for fmt in ("torch", "safetensors"):
            assert size["file_bytes"][fmt] == size["raw_bytes"] + size["overhead_bytes"][fmt]
        for op in OPERATIONS:
            medians, runs = size[op]["median_s"], size[op]["runs_s"]
            assert medians.keys() == runs.keys()
            assert all(len(r) == repeats for r in runs.values())
            assert all(m > 0 for m in medians.values())
    # Lazy is never compared with eager: each operation pairs variants of one kind only.
    assert set(size["eager_load"]["median_s"]) == {"torch", "safetensors"}
    assert set(size["lazy_open"]["median_s"]) == {"torch", "safetensors"}
    shown = views.view("serialization", results)
    assert all(isinstance(v, str) for v in shown["headline"].values())
    table = shown["table_md"].splitlines()
    assert table[0].startswith("| operation |") and all(line.startswith("|") for line in table)


@pytest.mark.heavy  # a whole quick benchmark run
def test_quick_run_writes_results_and_plot_outside_the_repo(tmp_path: Path, monkeypatch):
    tiny = dataclasses.replace(QUICK, serialization_sizes=(("kib_16", 16 * 1024, 4),))
    monkeypatch.setattr(runner, "QUICK", tiny)
    monkeypatch.setattr(runner.tempfile, "tempdir", str(tmp_path))  # where --quick writes
    committed_before = COMMITTED.stat().st_mtime_ns

    assert runner.main(["--quick", "--only", "serialization"]) == 0

    # --quick without --out never replaces the committed results.
    assert COMMITTED.stat().st_mtime_ns == committed_before
    (out,) = tmp_path.glob("bench-quick-*")
    results = json.loads((out / "serialization.json").read_text("utf8"))
    check_structure(results)
    assert results["provenance"]["mode"] == "quick" and list(results["sizes"]) == ["kib_16"]
    assert (out / "serialization.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The scratch files of the measurement are gone; only the two results files remain.
    assert [p.name for p in tmp_path.glob("bench-*")] == [out.name]


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
    assert not unresolved(PAGE, "serialization", views.view("serialization", committed))


def winner(runs: dict[str, list[float]]) -> str | None:
    """The page's rule: a format is faster only when its slowest run beat the other's fastest."""
    if max(runs["torch"]) < min(runs["safetensors"]):
        return "torch"
    if max(runs["safetensors"]) < min(runs["torch"]):
        return "safetensors"
    return None


def test_the_committed_numbers_support_what_the_page_says(committed: dict):
    """The page's sentences about the measurements, checked against the measurements."""
    sizes = list(committed["sizes"].values())
    shown = views.view("serialization", committed)
    headline = shown["headline"]
    labels = [s["label"] for s in shown["sizes"].values()]
    # "save_file was faster than torch.save at ...; within noise at ...": from the runs
    for op, sentence, names in (
        ("save", "save_comparison", {"torch": "`torch.save`", "safetensors": "`save_file`"}),
        (
            "eager_load",
            "eager_comparison",
            {"torch": "`torch.load`", "safetensors": "the eager safetensors load"},
        ),
    ):
        winners = [winner(s[op]["runs_s"]) for s in sizes]
        for found, label in zip(winners, labels, strict=True):
            part = next(
                p
                for p in headline[sentence].split("; ")
                if re.search(rf"\b{re.escape(label)}\b|every size", p)
            )
            if found is None:
                assert "within noise" in part, (op, label, part)
            else:
                assert part.startswith(f"{names[found]} was faster"), (op, label, part)
    # "opening lazily costs about the same whatever the file's size"
    for fmt in ("torch", "safetensors"):
        opens = [s["lazy_open"]["median_s"][fmt] for s in sizes]
        assert max(opens) < 4 * min(opens), (fmt, opens)
    # "do not load the whole file for one tensor": a full torch.load is slower at every size
    for s in sizes:
        one = s["one_tensor"]["runs_s"]
        assert max(one["safetensors"]) < min(one["torch_full"])
    # "to read a few tensors of a large file ... map it with torch.load": at the largest size
    one = sizes[-1]["one_tensor"]["runs_s"]
    assert max(one["torch_mmap"]) < min(one["torch_full"])
    # "for many small files safetensors loads faster": at the smallest size, beyond noise
    assert winner(sizes[0]["eager_load"]["runs_s"]) == "safetensors"
    # "for one large file the copy, not the format, sets the time": within a factor of two
    eager = sizes[-1]["eager_load"]["median_s"]
    assert 0.5 < eager["torch"] / eager["safetensors"] < 2, eager
    # safetensors adds fewer bytes than torch.save at every size
    assert all(s["overhead_bytes"]["safetensors"] < s["overhead_bytes"]["torch"] for s in sizes)
