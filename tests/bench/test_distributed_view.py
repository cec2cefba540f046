"""The performance page's distributed section, rendered by bench/views/distributed.py: each
figure and sentence it quotes, recomputed from the raw runs in docs/assets/bench/distributed.json
(statistics.median, max, min: not the view's own derivation)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from bench import views
from bench.timing import fmt_time

STORED = Path(__file__).resolve().parents[2] / "docs" / "assets" / "bench" / "distributed.json"
COMMITTED = STORED.parent / "performance.json"  # the other results file beside it


def median(values: list[float]) -> float:
    return statistics.median(values)


def test_the_distributed_sentences():
    stored = json.loads((COMMITTED.parent / "distributed.json").read_text("utf8"))
    h = views.view("distributed", stored)["headline"]
    sizes = list(stored["save"]["sizes"].values())
    largest = sizes[-1]
    m = {name: median(r) for name, r in largest["runs_s"].items()}
    assert h["dcp_files"] == str(largest["dcp_files"])
    assert h["dcp_bytes_largest"] == f"{largest['dcp_bytes']:,}"
    assert h["file_bytes_largest"] == f"{largest['file_bytes']:,}"
    assert h["stall_share_largest"] == f"{m['dcp_async_stall'] / m['dcp_save'] * 100:.0f} %"
    for size in sizes:
        ratio = median(size["runs_s"]["dcp_save"]) / median(size["runs_s"]["floor"])
        assert f"{ratio:.2f}× the floor at" in h["dcp_ratios"]
    worlds = stored["train"]["worlds"].values()
    outside = [
        median([(r["loop_s"] - r["step_time_sum_s"]) / r["counted_updates"] for r in w["runs"]])
        for w in worlds
    ]
    assert h["outside_update"].startswith(f"{outside[0] * 1e3:.2f} ms at W = 1")
    assert h["save_sync"].startswith("with an") == stored["save"]["sync_before_save"]
    # the state is the save section's: 16 float32 tensors
    assert {size["tensors"] for size in sizes} == {16}


def test_the_distributed_figures_are_the_stored_ones():
    stored = json.loads((COMMITTED.parent / "distributed.json").read_text("utf8"))
    h = views.view("distributed", stored)["headline"]
    train, save = stored["train"], stored["save"]
    worlds = [w["world_size"] for w in train["worlds"].values()]
    assert h["worlds"] == ", ".join(map(str, worlds[:-1])) + f" and {worlds[-1]}"
    for key in ("shards", "steps", "save_every", "warmup_updates", "eval_every", "runs_per_world"):
        assert h[key] == str(train[key]), key
    assert h["save_world"] == str(save["world_size"])
    counted = {r["counted_updates"] for w in train["worlds"].values() for r in w["runs"]}
    assert h["counted_updates"] == str(counted.pop()) and not counted
    largest = list(save["sizes"].values())[-1]["runs_s"]
    assert h["stall_largest"] == fmt_time(median(largest["dcp_async_stall"]))
    assert h["dcp_largest"] == fmt_time(median(largest["dcp_save"]))
    assert h["async_done_largest"] == fmt_time(median(largest["dcp_async_done"]))


def test_the_distributed_provenance_and_cells():
    """'This run was measured on ...'; 'Each time in the save table, and the median rate in the
    training table, gives the median and, in brackets, how far the runs spread, (slowest -
    fastest) / median.'"""
    stored = json.loads((COMMITTED.parent / "distributed.json").read_text("utf8"))
    shown = views.view("distributed", stored)
    p, summary = stored["provenance"], shown["provenance"]["summary"]
    assert p["machine"]["cpu"] in summary and f"torch {p['versions']['torch']}" in summary
    assert shown["provenance"]["date"] == p["started"][:10] + " " + p["started"][11:16] + " UTC"
    assert shown["provenance"]["duration_s"] == p["duration_s"]  # 'These measurements took'
    for size in stored["save"]["sizes"].values():
        for runs in size["runs_s"].values():
            spread = (max(runs) - min(runs)) / median(runs)
            cell = f"{fmt_time(median(runs))} ({spread * 100:.0f} %)"
            assert cell in shown["save_table_md"], cell
    for w in stored["train"]["worlds"].values():
        rates = [r["counted_updates"] / r["loop_s"] for r in w["runs"]]
        spread = (max(rates) - min(rates)) / median(rates)
        cell = f"| {median(rates):,.0f} ({spread * 100:.0f} %) |"
        assert cell in shown["train_table_md"], cell
