"""What the performance page says each benchmark does, checked on the measurement code itself.

Each test runs one measurement (or one of its parts) on a tiny plan with its timing replaced by a
recorder, and asserts the sentence of docs/performance.md that describes it: what the warm and
cold sampler paths are, what the save floor syncs, what the hash variants hash, what each load
path reads and reports, and where the loop's clock stops. The committed results then say which
of the plan's switches the stored run had on.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import blake3
import pytest
import torch

from bench.measurements import (
    hash_speed,
    load_memory,
    loop_overhead,
    sampler_position,
    save_speed,
)
from bench.plan import QUICK
from resume_lab import hashing
from resume_lab.checkpoint import MANIFEST, STATE_FILE, save_checkpoint

COMMITTED = Path(__file__).resolve().parents[2] / "docs" / "assets" / "bench" / "performance.json"


def run_once(record: dict[str, Any]):
    """A side_by_side that calls each variant once, untimed, and keeps the variants."""

    def side_by_side(variants, repeats, before=None):
        record.update(variants=variants, before=before)
        for name, fn in variants.items():
            if before:
                before()
            record.setdefault("calls", []).append(name)
            record.setdefault("results", {})[name] = fn()
        return {name: [1.0] * repeats for name in variants}

    return side_by_side


def test_warm_reuses_one_drawn_order_and_cold_loads_a_fresh_sampler(monkeypatch):
    """'Warm means the epoch's order is already drawn; cold means a fresh sampler, loaded from
    the checkpoint's state, draws it first'; 'the sampler's starts at different k, and its warm
    and cold timings, are timed one block after another'."""
    made: list[Any] = []
    draws: list[int] = []
    real_randperm = torch.randperm

    class Recording(sampler_position.StepIndexedSampler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.loaded = False
            made.append(self)

        def load_state_dict(self, state: dict[str, Any]) -> None:
            super().load_state_dict(state)
            self.loaded = True

    calls: list[dict[str, tuple[list[Any], list[int]]]] = []  # per side_by_side call

    def side_by_side(variants, repeats, before=None):
        calls.append({})
        for name, fn in variants.items():
            known, draws[:] = len(made), []
            fn()
            calls[-1][name] = (made[known:], list(draws))
        return {name: [1.0] * repeats for name in variants}

    monkeypatch.setattr(sampler_position, "StepIndexedSampler", Recording)
    monkeypatch.setattr(sampler_position, "side_by_side", side_by_side)
    monkeypatch.setattr(
        torch, "randperm", lambda n, **kw: draws.append(n) or real_randperm(n, **kw)
    )
    plan = dataclasses.replace(QUICK, sampler_examples=800, sampler_ks=(1, 50), min_sample_s=0.0)
    sampler_position.measure(plan)
    *per_k, draw = calls
    # one block per k, warm then cold, each interleaving only that k's start and replay:
    # the starts at different k, and the warm and cold runs, are timed one block after another
    assert len(per_k) == 2 * len(plan.sampler_ks)
    for warm, cold in zip(per_k[::2], per_k[1::2], strict=True):
        assert warm == {"start": ([], []), "replay": ([], [])}  # the order drawn already
        assert list(cold) == ["start", "replay"]
        for (fresh,), drawn in (*cold.values(), *draw.values()):
            assert fresh.loaded and fresh.seed == made[0].seed  # the checkpoint's seed
            assert drawn == [plan.sampler_examples]  # draws the epoch's order first


def test_the_floor_is_torch_save_and_one_fsync_of_a_new_file(monkeypatch, tmp_path: Path):
    """'a plain torch.save to a new file, then one fsync of that file: no hash, no manifest, no
    folder synced', with an os.sync() before every timed save."""
    record: dict[str, Any] = {}
    monkeypatch.setattr(save_speed, "side_by_side", run_once(record))
    save_speed.measure_size("t", 16 * 4096, 1, True, tmp_path)
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    sync_calls: list[int] = []
    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "sync", lambda: sync_calls.append(1))
    record["before"]()
    assert sync_calls == [1] and not list(tmp_path.iterdir())  # a new file, after os.sync()
    record["variants"]["floor"]()
    assert synced == [str(tmp_path / "t-floor.pt")]  # one fsync, of the file alone
    assert [p.name for p in tmp_path.iterdir()] == ["t-floor.pt"]  # no manifest
    committed = json.loads(COMMITTED.read_text("utf8"))
    assert committed["plan"]["sync_before_save"] is True  # the stored run synced before each


def test_no_helper_threads_hashes_every_write_in_line(monkeypatch, tmp_path: Path):
    """'the same save with PARALLEL_MIN raised above every write, so that each is hashed in line
    and nothing is synced in the background'."""
    record: dict[str, Any] = {}
    monkeypatch.setattr(save_speed, "side_by_side", run_once(record))
    save_speed.measure_size("t", 16 * 4 * hashing.HashingWriter.PARALLEL_MIN, 1, False, tmp_path)
    threads: dict[str, set[str]] = {}
    background: list[int] = []
    real_fdatasync = hashing.fdatasync

    class Hasher:
        def __init__(self) -> None:
            self.inner = blake3.blake3()

        def update(self, data: Any) -> None:
            threads.setdefault(current, set()).add(threading.current_thread().name)
            self.inner.update(data)

        def hexdigest(self) -> str:
            return self.inner.hexdigest()

    monkeypatch.setitem(hashing.HASHES, "blake3", Hasher)
    monkeypatch.setattr(
        hashing, "fdatasync", lambda fd: background.append(fd) or real_fdatasync(fd)
    )
    for current in ("save_blake3", "inline"):
        record["before"]()
        background.clear()
        record["variants"][current]()
        threads[current + " synced"] = {str(bool(background))}
    assert threads["inline"] == {"MainThread"} and threads["inline synced"] == {"False"}
    assert any(t.startswith("checkpoint") for t in threads["save_blake3"])  # the default
    assert threads["save_blake3 synced"] == {"True"}
    assert sys.maxsize > hashing.HashingWriter.PARALLEL_MIN  # restored after


def test_the_hash_variants_are_the_labs_own(monkeypatch, tmp_path: Path):
    """'in the whole save_checkpoint, once with each; over the state's bytes in memory; and
    streamed from a file just written with the lab's file_digest'; 'BLAKE3, own threads is
    blake3.blake3(max_threads=blake3.blake3.AUTO)'."""
    record: dict[str, Any] = {}
    monkeypatch.setattr(hash_speed, "side_by_side", run_once(record))
    threads: list[int] = []
    real_blake3 = blake3.blake3

    def counting(*args: Any, max_threads: int = 1) -> Any:
        threads.append(max_threads)
        return real_blake3(*args, max_threads=max_threads)

    monkeypatch.setattr(hash_speed.blake3, "blake3", counting)
    monkeypatch.setattr(counting, "AUTO", real_blake3.AUTO, raising=False)
    state = save_speed.make_state(16 * 4096)
    data = b"".join(t.numpy().tobytes() for t in state["model"].values())
    hash_speed.measure_size(16 * 4096, 1, tmp_path)
    results = record["results"]
    assert results["memory_sha256"] == hashlib.sha256(data).hexdigest()
    assert results["memory_blake3"] == results["memory_blake3_threads"]
    assert results["memory_blake3"] == real_blake3(data).hexdigest()
    assert threads[-1] == real_blake3.AUTO  # the threaded variant alone
    assert isinstance(results["file_sha256"], hashing.FileDigest)  # the lab's file_digest
    assert hash_speed.file_digest is hashing.file_digest
    stored = json.loads(COMMITTED.read_text("utf8"))["save"]
    assert {"save_blake3", "save_sha256"} <= set(next(iter(stored.values()))["runs_s"])


def test_each_load_path_reads_every_tensor_and_reports_its_peak(monkeypatch, tmp_path: Path):
    """'Each then reads every tensor once'; 'the process's high-water mark (VmHWM, reset just
    before loading) minus its resident size before loading'; RssAnon and RssFile growths."""
    width, layers = 64, 2
    with torch.device("meta"):
        shapes = load_memory.build_big_model(width, layers).state_dict()
    state = {name: torch.randn(t.shape) for name, t in shapes.items()}
    checkpoint = save_checkpoint({STATE_FILE: state}, tmp_path, "m", step=0, config={})
    expected = hashlib.sha256()
    for t in state.values():
        expected.update(t.numpy().data)
    real_write = Path.write_text
    order: list[str] = []

    def write_text(self: Path, text: str, *args: Any, **kwargs: Any) -> int:
        if str(self) == "/proc/self/clear_refs":
            order.append(f"reset {text}")
        return real_write(self, text, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", write_text)
    for how in load_memory.LOAD_PATHS:
        order.clear()
        statuses = iter(
            [
                {"VmRSS": 100, "VmHWM": 100, "RssAnon": 60, "RssFile": 40},
                {"VmRSS": 150, "VmHWM": 400, "RssAnon": 70, "RssFile": 80},
            ]
        )

        def status(statuses=statuses) -> dict[str, int]:
            order.append("status")
            return next(statuses)

        monkeypatch.setattr(load_memory, "proc_status", status)
        result = load_memory.worker(str(checkpoint), how, width, layers)
        assert order == ["reset 5", "status", "status"], how  # the reset, then the baseline
        assert result["tensors_sha256"] == expected.hexdigest(), how  # every tensor read
        assert result["peak_extra_bytes"] == 400 - 100  # VmHWM after - VmRSS before
        assert (result["rss_anon_extra_bytes"], result["rss_file_extra_bytes"]) == (10, 40)
    assert (checkpoint / MANIFEST).exists()


def test_the_load_clock_stops_before_the_tensors_are_read(monkeypatch, tmp_path: Path):
    """'each timed until the load returned, before the tensors were read': on every path the
    clock's second reading comes before the first tensor is read."""
    width, layers = 64, 2
    with torch.device("meta"):
        shapes = load_memory.build_big_model(width, layers).state_dict()
    state = {name: torch.randn(t.shape) for name, t in shapes.items()}
    checkpoint = save_checkpoint({STATE_FILE: state}, tmp_path, "m", step=0, config={})
    events: list[str] = []

    class Digest:
        def update(self, data: Any) -> None:
            events.append("read")

        def hexdigest(self) -> str:
            return ""

    def clock() -> float:
        events.append("clock")
        return 0.0

    monkeypatch.setattr(load_memory, "time", SimpleNamespace(perf_counter=clock))
    monkeypatch.setattr(load_memory, "hashlib", SimpleNamespace(sha256=Digest))
    for how in load_memory.LOAD_PATHS:
        events.clear()
        load_memory.worker(str(checkpoint), how, width, layers)
        assert events == ["clock", "clock"] + ["read"] * len(state), how


def test_the_stored_loads_ran_each_in_a_fresh_process_with_the_peak_reset():
    vl = json.loads(COMMITTED.read_text("utf8"))["verify_load"]
    assert vl["fresh_process_per_load"] is True
    assert all(p["peak_reset"] for p in vl["paths"].values())
    assert list(vl["paths"]) == list(load_memory.LOAD_PATHS)


def test_the_loop_clock_stops_at_the_last_boundary_before_the_final_save(monkeypatch, tmp_path):
    """'Every time here ends at the last update boundary, before the save fit makes when it
    ends.'"""
    order: list[str] = []

    class Clock(loop_overhead.UpdateClock):
        def on_boundary(self, trainer) -> None:
            super().on_boundary(trainer)
            order.append("clock")

    class Saver(loop_overhead.Checkpoint):
        def on_fit_end(self, trainer, reason) -> None:
            order.append("fit end")
            super().on_fit_end(trainer, reason)

        def save(self, trainer, *args: Any, **kwargs: Any):
            order.append("save")
            return super().save(trainer, *args, **kwargs)

    monkeypatch.setattr(loop_overhead, "UpdateClock", Clock)
    monkeypatch.setattr(loop_overhead, "Checkpoint", Saver)
    config = loop_overhead.LabConfig(steps=6, patience=10**6, eval_every=4)
    data = loop_overhead.make_blobs(config.data_seed)
    loop_overhead.trainer_loop(config, data, 6, tmp_path)
    assert order.count("clock") == 6
    last = len(order) - 1 - order[::-1].index("clock")
    assert order[last + 1 :] == ["fit end", "save"]  # the final save, after the clock's last


def test_verify_is_timed_on_the_checkpoint_just_written(monkeypatch, tmp_path: Path):
    """'verify was timed on the checkpoint save_checkpoint had just written'."""
    order: list[str] = []
    real_save = load_memory.save_checkpoint

    def save(*args: Any, **kwargs: Any) -> Path:
        order.append("save_checkpoint")
        return real_save(*args, **kwargs)

    def side_by_side(variants, repeats, before=None):
        order.append(f"time {', '.join(variants)}")
        return {name: [1.0] * repeats for name in variants}

    class Stop(Exception):
        pass

    def run_workers(*args: Any, **kwargs: Any):
        raise Stop

    monkeypatch.setattr(load_memory, "save_checkpoint", save)
    monkeypatch.setattr(load_memory, "side_by_side", side_by_side)
    monkeypatch.setattr(load_memory, "run_workers", run_workers)
    monkeypatch.setattr(os, "sync", lambda: order.append("os.sync"))
    with pytest.raises(Stop):
        load_memory.measure_in(dataclasses.replace(QUICK, model_width=16, model_layers=1), tmp_path)
    assert order == ["save_checkpoint", "time verify"]  # nothing in between


def test_the_two_rules_are_bench_timing():
    """'bench/timing.py holds the two rules above (a winner only when the runs separate; a
    target judged only when its floor is steadier than its margin)'."""
    from bench.timing import TOO_NOISY, compare, judge

    assert compare({"a": [1.0, 2.0], "b": [2.5, 3.0]}, "a", "b")["winner"] == "a"
    assert compare({"a": [1.0, 2.6], "b": [2.5, 3.0]}, "a", "b")["winner"] is None
    steady, noisy = [1.0, 1.05, 1.1], [1.0, 1.2, 1.5]  # spread 10 %, 50 %
    assert judge(1.1, "le", 1.2, steady) == (True, "met")
    assert judge(1.1, "le", 1.2, noisy) == (None, TOO_NOISY)


def test_the_distributed_method_is_the_stored_runs():
    """The distributed section's method sentences, from distributed.json: an os.sync() before
    each save; a file per rank and .metadata, every byte once; the copy checked; the counted
    updates are the updates after the warm-up less the evaluating ones."""
    stored = json.loads((COMMITTED.parent / "distributed.json").read_text("utf8"))
    save, train = stored["save"], stored["train"]
    assert save["sync_before_save"] is True
    for size in save["sizes"].values():
        assert size["dcp_files"] == save["world_size"] + 1  # a .distcp per rank, .metadata
        assert size["file_bytes"] <= size["dcp_bytes"] < 1.01 * size["file_bytes"]
        assert size["staged_copy_checked"] is True
        assert set(size["runs_s"]) == {
            "floor",
            "save_checkpoint",
            "dcp_save",
            "dcp_async_stall",
            "dcp_async_done",
        }
    after_warmup = range(train["warmup_updates"] + 1, train["steps"] + 1)
    evaluating = [u for u in after_warmup if u % train["eval_every"] == 0]
    for w in train["worlds"].values():
        assert len(w["runs"]) == train["runs_per_world"]
        for run in w["runs"]:
            assert run["counted_updates"] == len(after_warmup) - len(evaluating)
