"""The distributed benchmark (DCP save over ranks, throughput at W = 1, 2, 4): its results hold
numbers only, and the performance page's sentences about them follow from the stored runs.

No timing is asserted: the comparisons are checked against the runs with the page's rule written
out again below (A beats B only when A's slowest run beats B's fastest).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from quoted_results import quoted_paths, unresolved

from bench import __main__ as runner
from bench import views

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "docs" / "assets" / "bench" / "distributed.json"
PAGE = ROOT / "docs" / "performance.md"
SAVE_VARIANTS = {"floor", "save_checkpoint", "dcp_save", "dcp_async_stall", "dcp_async_done"}
TABLES = ("save_table_md", "train_table_md")


def numbers_only(value: Any, where: str = "") -> list[str]:
    """Where the measured part holds anything but numbers, flags and None (no names at all)."""
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in numbers_only(v, f"{where}.{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in numbers_only(v, f"{where}.{i}")]
    return [] if isinstance(value, int | float | None) else [f"{where}: {value!r}"]


def check_stored(results: dict) -> None:
    assert set(results) == {"plan", "save", "train", "provenance"}
    plan, save, train = results["plan"], results["save"], results["train"]
    assert not numbers_only(save) and not numbers_only(train)
    assert save["world_size"] == plan["distributed_save_world"] == 2
    for key, size in save["sizes"].items():
        runs = size["runs_s"]
        assert set(runs) == SAVE_VARIANTS == set(size["median_s"]), key
        assert all(len(r) == save["repeats"] and min(r) > 0 for r in runs.values()), key
        assert size["file_bytes"] > size["state_bytes"] and size["dcp_bytes"] > size["state_bytes"]
        assert size["staged_copy_checked"] is True  # the worker asserted it, untimed
        for i, stall in enumerate(runs["dcp_async_stall"]):  # it returned before it was written
            assert stall <= runs["dcp_async_done"][i], key
    assert [w["world_size"] for w in train["worlds"].values()] == plan["distributed_worlds"]
    for key, w in train["worlds"].items():
        assert len(w["runs"]) == train["runs_per_world"], key
        for run in w["runs"]:
            assert run["updates"] == train["steps"] and run["counted_updates"] > 0, key
            # the lab's step_time is part of each counted boundary-to-boundary interval
            assert 0 < run["step_time_sum_s"] <= run["loop_s"], key
    prov = results["provenance"]
    assert prov["duration_s"] > 0 and len(prov["load_average_end"]) == 3


def check_view(shown: dict) -> None:
    assert all(isinstance(v, str) for v in shown["headline"].values())
    for table in TABLES:
        lines = shown[table].splitlines()
        assert len(lines) >= 3 and all(line.startswith("|") for line in lines), table
    assert shown["provenance"]["summary"] and shown["provenance"]["date"]


@pytest.mark.slow  # three launches of torch processes: half a minute on two busy cores
def test_quick_run_writes_numbers_outside_the_repo(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(runner.tempfile, "tempdir", str(tmp_path))  # where --quick writes
    before = COMMITTED.stat().st_mtime_ns

    assert runner.main(["--quick", "--only", "distributed"]) == 0

    assert COMMITTED.stat().st_mtime_ns == before  # --quick never replaces the committed file
    (out,) = tmp_path.glob("bench-quick-*")
    results = json.loads((out / "distributed.json").read_text("utf8"))
    check_stored(results)
    check_view(views.view("distributed", results))
    assert results["provenance"]["mode"] == "quick"
    # the launches' scratch folders are gone; only the results remain
    assert [p.name for p in tmp_path.glob("bench-*")] == [out.name]
    assert [p.name for p in out.iterdir()] == ["distributed.json"]


@pytest.fixture(scope="module")
def committed() -> dict:
    assert COMMITTED.exists(), "run `python -m bench --only distributed` to measure"
    return json.loads(COMMITTED.read_text("utf8"))


@pytest.fixture(scope="module")
def shown(committed: dict) -> dict:
    return views.view("distributed", committed)


def test_committed_results_are_a_full_run_of_numbers(committed: dict, shown: dict):
    check_stored(committed)
    check_view(shown)
    assert committed["provenance"]["mode"] == "full"
    assert max(s["state_bytes"] for s in committed["save"]["sizes"].values()) >= 10**8
    train = committed["train"]
    assert committed["plan"]["distributed_worlds"] == [1, 2, 4] and train["shards"] == 4
    # the page says which world sizes ran more processes than the machine has cores
    for w in shown["train"]["worlds"].values():
        assert w["oversubscribed"] == (w["world_size"] > train["cores"])
        assert (f"W = {w['world_size']} runs" in shown["headline"]["oversubscribed"]) == (
            w["oversubscribed"]
        )


def test_every_number_the_page_quotes_is_in_the_committed_results(shown: dict):
    assert quoted_paths(PAGE, "distributed"), "the page quotes no distributed results"
    assert not unresolved(PAGE, "distributed", json.loads(COMMITTED.read_text("utf8")))


def winner(runs: dict[str, list[float]], a: str, b: str) -> str | None:
    """The page's rule for "A beats B": A's slowest run beats B's fastest."""
    if max(runs[a]) < min(runs[b]):
        return a
    if max(runs[b]) < min(runs[a]):
        return b
    return None


def per_update(train: dict) -> dict[str, list[float]]:
    return {
        key: [r["loop_s"] / r["counted_updates"] for r in w["runs"]]
        for key, w in train["worlds"].items()
    }


def test_the_committed_numbers_support_what_the_page_says(committed: dict, shown: dict):
    """Every comparison the section words, from the raw runs: a winner only when they separate."""
    for key, size in committed["save"]["sizes"].items():
        for c in shown["save"]["sizes"][key]["compare"].values():
            assert c["winner"] == winner(size["runs_s"], c["a"], c["b"]), (key, c)
    seconds = per_update(committed["train"])
    worlds = shown["train"]["worlds"]
    baseline = next(iter(worlds))
    for key, w in worlds.items():
        if key == baseline:
            assert w["vs_baseline"] is None and not w["sentence"]
            continue
        found = winner(seconds, key, baseline)
        assert w["vs_baseline"]["winner"] == found, key
        sentence, name = w["sentence"], f"W = {w['world_size']}"
        assert sentence in shown["headline"]["by_world"]
        assert ("within noise" in sentence) == (found is None), sentence
        if found == key:
            assert sentence.startswith(f"{name} trained faster than W = 1"), sentence
        elif found == baseline:
            assert sentence.startswith(f"W = 1 trained faster than {name}"), sentence
    for key, size in shown["save"]["sizes"].items():
        for worded, sentence in size["sentences"].items():
            assert sentence in shown["headline"][worded]
            found = size["compare"][worded]["winner"]
            assert ("within noise" in sentence) == (found is None), (key, sentence)
            assert (" was faster than " in sentence) == (found is not None), (key, sentence)


def synthetic(train_runs: dict[str, list[float]], save_runs: dict[str, list[float]]) -> dict:
    """The committed results with made-up runs: seconds per update per world, and save times."""
    results = copy.deepcopy(json.loads(COMMITTED.read_text("utf8")))
    for key, w in results["train"]["worlds"].items():
        w["runs"] = [
            {**w["runs"][0], "counted_updates": 100, "loop_s": s * 100, "step_time_sum_s": s}
            for s in train_runs[key]
        ]
    for size in results["save"]["sizes"].values():
        size["runs_s"] = save_runs
        size["median_s"] = {k: sorted(v)[len(v) // 2] for k, v in save_runs.items()}
    return results


def test_a_winner_is_named_only_when_the_runs_separate():
    save = {
        "floor": [1.0, 1.1, 1.2],
        "save_checkpoint": [1.0, 1.1, 1.2],
        "dcp_save": [1.15, 1.3, 1.5],  # overlaps the floor: within noise
        "dcp_async_stall": [0.1, 0.2, 0.3],  # separates from dcp.save: a winner
        "dcp_async_done": [1.6, 1.7, 1.8],
    }
    shown = views.view(
        "distributed",
        synthetic({"w_1": [0.01, 0.011], "w_2": [0.0105, 0.02], "w_4": [0.03, 0.04]}, save),
    )
    headline = shown["headline"]
    assert "within noise" in headline["dcp_vs_floor"] and " than " not in headline["dcp_vs_floor"]
    assert "the stall of dcp.async_save was faster than dcp.save" in headline["stall_vs_dcp"]
    assert "dcp.save over 2 ranks was faster than dcp.async_save" in headline["async_done_vs_dcp"]
    assert "W = 2 and W = 1 were within noise" in headline["by_world"]
    assert "W = 1 trained faster than W = 4" in headline["by_world"]
    rows = shown["train_table_md"].splitlines()[2:]
    assert "within noise" in rows[1] and "slower" in rows[2]
