"""The performance page's rendered sentences, one test per claim, against the committed runs.

Each test recomputes what a sentence of docs/performance.md says from the raw runs in
docs/assets/bench/performance.json (statistics.median, max, min: not the view's own
derivation) and checks the words the view gives the page. The method the page describes
(interleaved, alternating who goes first; the loop's callbacks) is checked on the measurement
code itself, with its work replaced by recorders.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import statistics
from pathlib import Path
from typing import Any

import pytest
import torch

from bench import views
from bench.measurements import load_memory, loop_overhead
from bench.plan import QUICK
from bench.timing import fmt_duration, fmt_time, side_by_side

COMMITTED = Path(__file__).resolve().parents[2] / "docs" / "assets" / "bench" / "performance.json"
GB = 10**9


@pytest.fixture(scope="module")
def runs() -> dict[str, Any]:
    return json.loads(COMMITTED.read_text("utf8"))


@pytest.fixture(scope="module")
def shown(runs: dict[str, Any]) -> dict[str, Any]:
    return views.view("performance", runs)


def median(values: list[float]) -> float:
    return statistics.median(values)


def beats(a: list[float], b: list[float]) -> bool:
    """The page's rule: A beats B when A's slowest run beat B's fastest."""
    return max(a) < min(b)


def judged(measured: float, op: str, threshold: float, floor: list[float] | None) -> bool | None:
    """The page's target rule, written out: None when the floor spread beyond the margin."""
    if floor is not None and (max(floor) - min(floor)) / median(floor) > abs(threshold - 1):
        return None
    return {"le": measured <= threshold, "ge": measured >= threshold, "lt": measured < threshold}[
        op
    ]


# --- the method -------------------------------------------------------------------------------


def test_the_provenance_line_is_the_stored_record(runs: dict, shown: dict):
    p, summary = runs["provenance"], shown["provenance"]["summary"]
    machine, versions = p["machine"], p["versions"]
    for fact in (machine["cpu"], f"{machine['cores']} cores", f"torch {versions['torch']}"):
        assert fact in summary
    assert f"{p['load_average_start'][0]:.1f} at the start" in summary
    assert f"{p['load_average_end'][0]:.1f} at the end" in summary
    assert shown["provenance"]["date"] == p["started"][:10] + " " + p["started"][11:16] + " UTC"


def test_the_suite_is_timed_after_the_other_measurements(runs: dict):
    """'These measurements took N s; the test suite is timed after them.'"""
    started = datetime.datetime.fromisoformat(runs["provenance"]["started"])
    finished = datetime.datetime.fromisoformat(runs["suite"]["finished"])
    ended = started + datetime.timedelta(seconds=runs["provenance"]["duration_s"])
    assert finished > ended


def test_variants_are_timed_interleaved_alternating_who_goes_first(monkeypatch, tmp_path):
    order: list[str] = []
    side_by_side({name: lambda n=name: order.append(n) for name in "abc"}, repeats=3)
    # one untimed warm-up each, then rounds in alternating order
    assert order == list("abc" + "abc" + "cba" + "abc")

    loads: list[str] = []

    def worker(checkpoint: str, how: str, width: int, layers: int) -> dict:
        loads.append(how)
        return {}

    monkeypatch.setattr(load_memory, "worker", worker)
    load_memory.run_workers(tmp_path, 8, 1, repeats=3, fresh_process=False)
    paths = list(load_memory.LOAD_PATHS)
    assert loads == paths + paths[::-1] + paths

    loops: list[str] = []
    model = torch.nn.Linear(1, 1)

    def trainer(config, data, updates, folder):
        loops.append("trainer")
        return {"wall": 1.0, "cpu": 1.0}, model, []

    def bare(config, data, updates):
        loops.append("bare")
        return {"wall": 1.0, "cpu": 1.0}, model

    monkeypatch.setattr(loop_overhead, "trainer_loop", trainer)
    monkeypatch.setattr(loop_overhead, "bare_loop", bare)
    monkeypatch.setattr(loop_overhead, "make_blobs", lambda seed: None)
    monkeypatch.setattr(loop_overhead, "ram_folder", lambda: str(tmp_path))
    loop_overhead.measure(dataclasses.replace(QUICK, loop_repeats=3))
    # a warm-up each, then rounds alternating who goes first
    warm, rounds = ["trainer", "bare"], ["trainer", "bare", "bare", "trainer", "trainer", "bare"]
    assert loops == warm + rounds


def test_the_loop_benchmark_runs_the_trainer_with_the_labs_callbacks(monkeypatch, tmp_path):
    """'Trainer.fit with those five callbacks' (early stopping, checkpoints, the time budget,
    stop-after, progress), the benchmark's clock last; the checkpoint saves at a new best, and
    its periodic save falls after the last update."""
    built = []
    real = loop_overhead.build_trainer

    def recording(*args, **kwargs):
        built.append(real(*args, **kwargs))
        return built[-1]

    monkeypatch.setattr(loop_overhead, "build_trainer", recording)
    config = loop_overhead.LabConfig(steps=6, patience=10**6, eval_every=2)
    data = loop_overhead.make_blobs(config.data_seed)
    _, _, saves = loop_overhead.trainer_loop(config, data, 6, tmp_path)
    (trainer,) = built
    names = [type(c).__name__ for c in trainer.callbacks]
    assert names == [
        "EarlyStopping",
        "Checkpoint",
        "TimeBudget",
        "StopAfter",
        "Progress",
        "UpdateClock",
    ]
    checkpoint = trainer.callbacks[1]
    assert checkpoint.every > trainer.step == 6  # no periodic save inside the run
    accuracies = [r["val_accuracy"] for r in trainer.history if r["val_accuracy"] is not None]
    improved = [a for i, a in enumerate(accuracies) if a > max(accuracies[:i], default=-1.0)]
    assert len(saves) == len(improved) > 0  # one timed save at each new best


def test_a_ratio_is_a_ratio_of_medians_and_the_load_target_the_worst_run(runs: dict, shown: dict):
    sampler, save, loop, vl = runs["sampler"], runs["save"], runs["loop"], runs["verify_load"]
    last = sampler["per_k"][f"k_{sampler['ks'][-1]}"]["runs_s"]
    first = sampler["per_k"][f"k_{sampler['ks'][0]}"]["runs_s"]
    t = shown["targets"]
    assert t["sampler_speedup"]["measured"] == median(last["replay"]) / median(last["start"])
    assert t["sampler_flat"]["measured"] == median(last["start"]) / median(first["start"])
    for key, size in save.items():
        r = size["runs_s"]
        ratio = median(r["save_blake3"]) / median(r["floor"])
        assert shown["save"][key]["ratio"] == pytest.approx(ratio, rel=1e-12)
    bare, trainer = median(loop["runs_s"]["bare"]), median(loop["runs_s"]["trainer"])
    assert t["loop_throughput"]["measured"] == pytest.approx(bare / trainer, rel=1e-12)
    assert t["verify_throughput"]["measured"] == pytest.approx(
        vl["file_bytes"] / median(vl["verify"]["runs_s"]) / GB, rel=1e-12
    )
    lab = [r["peak_extra_bytes"] for r in vl["paths"]["load_checkpoint"]["runs"]]
    assert t["load_peak"]["measured"] == max(lab) / vl["model_bytes"]  # the worst run
    # the tables' cells are medians
    largest = list(save)[-1]
    assert f"| {fmt_time(median(save[largest]['runs_s']['floor']))} |" in shown["save_table_md"]
    assert f"start at k: {fmt_duration(median(last['start']))}" in shown["table_md"]


def test_every_target_is_judged_by_the_rule_and_counted(runs: dict, shown: dict):
    sampler, save, loop, suite = (runs[k] for k in ("sampler", "save", "loop", "suite"))
    first = sampler["per_k"][f"k_{sampler['ks'][0]}"]["runs_s"]["start"]
    largest = list(save.values())[-1]["runs_s"]
    t = shown["targets"]
    expected = {
        "sampler_flat": judged(t["sampler_flat"]["measured"], "le", 2.0, first),
        "sampler_speedup": judged(t["sampler_speedup"]["measured"], "ge", 1000.0, None),
        "save_overhead": judged(
            median(largest["save_blake3"]) / median(largest["floor"]), "le", 1.2, largest["floor"]
        ),
        "verify_throughput": judged(t["verify_throughput"]["measured"], "ge", 1.0, None),
        "load_peak": judged(t["load_peak"]["measured"], "le", 1.1, None),
        "loop_throughput": judged(
            median(loop["runs_s"]["bare"]) / median(loop["runs_s"]["trainer"]),
            "ge",
            0.95,
            loop["runs_s"]["bare"],
        ),
        "suite_make_test": judged(suite["make_test"]["wall_s"], "lt", 60.0, None),
        "suite_contract": judged(suite["contract"]["wall_s"], "lt", 5.0, None),
    }
    assert {k: v["met"] for k, v in t.items()} == expected
    for key, met in expected.items():
        word = {True: "met", None: "too noisy to judge"}.get(met, "missed")
        assert t[key]["verdict"].startswith(word), key
    h = shown["headline"]
    assert h["targets_met"] == str(sum(m is True for m in expected.values()))
    assert h["targets_judged"] == str(sum(m is not None for m in expected.values()))
    assert h["targets_not_met"] == str(sum(m is False for m in expected.values()))
    assert h["targets_noisy"] == str(sum(m is None for m in expected.values()))


# --- the sections -----------------------------------------------------------------------------


def test_the_sampler_sentences(runs: dict, shown: dict):
    s, h = runs["sampler"], shown["headline"]
    per_k = list(s["per_k"].values())
    first, last = per_k[0]["runs_s"], per_k[-1]["runs_s"]
    assert h["start_first"] == fmt_duration(median(first["start"]))
    assert h["start_last"] == fmt_duration(median(last["start"]))
    assert h["replay_last"] == fmt_duration(median(last["replay"]))
    grown = [e["k"] for e in per_k if min(e["runs_s"]["start"]) > 2 * max(first["start"])]
    assert h["sampler_shape"].startswith("at no k") == (not grown)
    # the replay grows with k
    replays = [median(e["runs_s"]["replay"]) for e in per_k]
    assert replays == sorted(replays)
    assert h["permutation"] == fmt_duration(s["permutation_s"])
    assert h["cold_start_last"] == fmt_duration(median(last["cold_start"]))
    assert h["cold_replay_last"] == fmt_duration(median(last["cold_replay"]))
    cold = median(last["cold_replay"]) / median(last["cold_start"])
    assert h["cold_speedup"] in (f"{cold:,.0f}×", f"{cold:.2f}×")


def test_the_sampler_names_a_winner_only_when_the_runs_separate(runs: dict, shown: dict):
    """'starting at k was faster' in the summary and the sentences only when the start's
    slowest run beat the replay's fastest; shown failing on runs made to overlap."""
    last = runs["sampler"]["per_k"][f"k_{runs['sampler']['ks'][-1]}"]["runs_s"]
    for when, start, replay in (("warm", "start", "replay"), ("cold", "cold_start", "cold_replay")):
        said = shown["headline"][f"{'cold_' if when == 'cold' else ''}start_vs_replay"]
        assert ("faster than the" in said) == beats(last[start], last[replay]), said
    overlapping = json.loads(json.dumps(runs))
    mixed = overlapping["sampler"]["per_k"][f"k_{runs['sampler']['ks'][-1]}"]["runs_s"]
    mixed["replay"] = [min(last["start"]) / 2, *last["replay"]]  # one replay beat every start
    again = views.view("performance", overlapping)
    assert "within noise" in again["headline"]["start_vs_replay"]
    assert "× (within noise) |" in again["table_md"].split("\n")[2]


def test_a_hash_that_won_from_the_file_contradicts_the_default():
    """The hash sentence's 'never faster ..., from the file' is checked, not assumed."""
    words = views.module("performance").words
    save = {"gb_1": {"default_hash": "blake3", "label": "1 GB"}}
    save["gb_1"]["compare"] = {"default_vs_other": {"winner": None}}
    memory = {"winner": "memory_blake3", "factor": 2.4}
    hashing = {"gb_1": {"compare": {"memory": memory, "file": {"winner": "file_sha256"}}}}
    choice = words.hash_choice(save, hashing)
    assert choice["contradicted"] and not choice["supported"]
    assert "SHA-256 hashed faster from the file at 1 GB" in choice["sentence"]
    hashing["gb_1"]["compare"]["file"]["winner"] = None
    assert words.hash_choice(save, hashing)["supported"]


def test_the_save_sentences(runs: dict, shown: dict):
    h, sizes = shown["headline"], list(runs["save"].values())
    for size in sizes:
        ratio = median(size["runs_s"]["save_blake3"]) / median(size["runs_s"]["floor"])
        assert f"{ratio:.2f}×" in h["save_ratios"]
    largest = sizes[-1]["runs_s"]
    floor = largest["floor"]
    spread = (max(floor) - min(floor)) / median(floor)
    assert h["save_floor_spread_largest"] == f"{spread * 100:.0f} %"
    assert h["save_margin"] == "20 %"
    for sentence, other in (
        ("save_vs_floor_largest", "floor"),
        ("helper_vs_inline_largest", "inline"),
    ):
        separated = beats(largest["save_blake3"], largest[other]) or beats(
            largest[other], largest["save_blake3"]
        )
        assert ("within noise" in h[sentence]) == (not separated), sentence
    file_bytes = sizes[-1]["file_bytes"]
    assert h["save_gbps_largest"] == f"{file_bytes / median(largest['save_blake3']) / GB:.2f} GB/s"
    assert h["floor_gbps_largest"] == f"{file_bytes / median(floor) / GB:.2f} GB/s"


def test_the_hash_sentences(runs: dict, shown: dict):
    h = shown["headline"]
    within = sum(
        not (beats(s["runs_s"]["save_blake3"], s["runs_s"]["save_sha256"]))
        and not beats(s["runs_s"]["save_sha256"], s["runs_s"]["save_blake3"])
        for s in runs["save"].values()
    )
    assert h["hash_writing"].count("within noise") == within
    largest = list(runs["hashing"].values())[-1]
    for name in ("memory_blake3", "memory_sha256", "file_blake3", "file_sha256"):
        size = largest["file_bytes" if name.startswith("file") else "memory_bytes"]
        rate = f"{size / median(largest['runs_s'][name]) / GB:.2f} GB/s"
        assert h[f"{name.split('_')[1]}_{name.split('_')[0]}_gbps_largest"] == rate
    threads = beats(largest["runs_s"]["memory_blake3_threads"], largest["runs_s"]["memory_blake3"])
    assert h["threads_vs_one"].startswith("BLAKE3 with its own threads was faster") == threads


def test_the_verify_and_load_sentences(runs: dict, shown: dict):
    h, vl = shown["headline"], runs["verify_load"]
    assert h["verify_gbps"] == f"{vl['file_bytes'] / median(vl['verify']['runs_s']) / GB:.2f} GB/s"
    paths = vl["paths"]
    lab = [r["peak_extra_bytes"] for r in paths["load_checkpoint"]["runs"]]
    plain = [r["peak_extra_bytes"] for r in paths["plain"]["runs"]]
    assert h["lab_vs_plain"].startswith("load_checkpoint peaked lower") == beats(lab, plain)
    meta = paths["meta_mmap"]["runs"]
    file = median([r["rss_file_extra_bytes"] for r in meta])
    anon = median([r["rss_anon_extra_bytes"] for r in meta])
    assert h["meta_file"].endswith("GB") and float(h["meta_file"][:-3]) == round(file / GB, 2)
    assert h["meta_anon"] == views.module("performance").fmt_bytes(max(0, anon))
    assert h["plain_ratio"] == f"{median(plain) / vl['model_bytes']:.2f}×"


def test_the_peak_reset_and_sync_clauses_follow_the_record(runs: dict, shown: dict):
    """'as every stored run did' only when every load path reset its peak; the os.sync()
    clause only when the plan synced before each save."""
    h, words = shown["headline"], views.module("performance").words
    reset = all(p["peak_reset"] for p in runs["verify_load"]["paths"].values())
    assert (h["peak_reset"] == "as every stored run did") == reset
    assert h["save_sync"].startswith("with an") == runs["plan"]["sync_before_save"]
    paths = {"meta_mmap": {"peak_reset": True}, "plain": {"peak_reset": False}}
    said = words.peak_reset(paths)
    assert "every" not in said and "the plain load" in said and "meta" not in said


def test_the_loop_sentences(runs: dict, shown: dict):
    h, loop = shown["headline"], runs["loop"]
    updates = loop["updates"]
    trainer, bare = median(loop["runs_s"]["trainer"]), median(loop["runs_s"]["bare"])
    saves = median(loop["runs_s"]["trainer_with_saves"])
    assert h["trainer_rate"] == f"{updates / trainer:,.0f}"
    assert h["bare_rate"] == f"{updates / bare:,.0f}"
    assert h["loop_overhead_per_update"] == fmt_duration((trainer - bare) / updates)
    assert h["trainer_rate_with_saves"] == f"{updates / saves:,.0f}"
    cpu = median(loop["cpu_runs_s"]["bare"]) / median(loop["cpu_runs_s"]["trainer"])
    assert h["loop_cpu_ratio"] == f"{cpu:.3f}"
    assert h["loop_saves"] == f"{loop['saves_per_run']:g}"
    assert h["loop_save_folder"] == (
        "under /dev/shm" if loop["checkpoint_in_ram"] else "in the temporary folder"
    )
    # the time without the saves is the time with them, less the saves
    for with_saves, without in zip(
        loop["runs_s"]["trainer_with_saves"], loop["runs_s"]["trainer"], strict=True
    ):
        assert with_saves >= without


def test_the_suite_sentences(runs: dict, shown: dict):
    h, make = shown["headline"], runs["suite"]["make_test"]
    folders = make["by_folder_s"]
    slowest = max(folders, key=folders.get)
    assert h["make_test_slowest"] == slowest
    assert h["make_test_summed"] == f"{sum(folders.values()):.1f} s"
    assert h["make_test_without_slowest"] == f"{sum(folders.values()) - folders[slowest]:.1f} s"
    assert h["make_test"] == f"{median([r['wall_s'] for r in make['runs']]):.1f} s"
    contract = runs["suite"]["contract"]
    assert h["contract"] == f"{median([r['wall_s'] for r in contract['runs']]):.2f} s"
    assert h["contract_pytest"] == f"{median([r['pytest_s'] for r in contract['runs']]):.2f} s"


def test_the_figures_each_section_quotes_are_the_stored_ones(runs: dict, shown: dict):
    """The remaining figures of each section, recomputed from the raw runs."""
    h, s, vl, loop = shown["headline"], runs["sampler"], runs["verify_load"], runs["loop"]
    per_k = list(s["per_k"].values())
    first, last = per_k[0]["runs_s"], per_k[-1]["runs_s"]
    assert (h["examples"], h["micro_batch"]) == (f"{s['examples']:,}", str(s["micro_batch"]))
    assert (h["k_first"], h["k_last"]) == (f"{s['ks'][0]:,}", f"{s['ks'][-1]:,}")
    warm = median(last["replay"]) / median(last["start"])
    assert h["sampler_speedup"] == f"{warm:,.0f}×"
    assert h["sampler_flat"] == f"{median(last['start']) / median(first['start']):.2f}×"
    sizes = list(runs["save"].values())
    largest = sizes[-1]["runs_s"]
    assert h["save_checkpoint_largest"] == fmt_time(median(largest["save_blake3"]))
    assert h["save_floor_largest"] == fmt_time(median(largest["floor"]))
    fmt_bytes = views.module("performance").fmt_bytes
    model = vl["model_bytes"]
    assert h["model_size"] == fmt_bytes(model)
    assert h["verify_hash"] == {"blake3": "BLAKE3", "sha256": "SHA-256"}[vl["hash"]]
    for name, key in (("lab_load", "load_checkpoint"), ("meta", "meta_mmap"), ("plain", "plain")):
        peaks = [r["peak_extra_bytes"] for r in vl["paths"][key]["runs"]]
        loads = [r["load_s"] for r in vl["paths"][key]["runs"]]
        peak = "lab_load_peak" if name == "lab_load" else f"{name}_peak"
        assert h[peak] == fmt_bytes(median(peaks))
        ratio = "lab_load_ratio" if name == "lab_load" else f"{name}_ratio"
        assert h[ratio] == f"{median(peaks) / model:.2f}×"
        if name != "lab_load":
            assert h[f"{name}_load"] == fmt_time(median(loads))
    lab = [r["peak_extra_bytes"] for r in vl["paths"]["load_checkpoint"]["runs"]]
    assert h["lab_load_ratio_max"] == f"{max(lab) / model:.3f}×"
    trainer, bare = median(loop["runs_s"]["trainer"]), median(loop["runs_s"]["bare"])
    saves = median(loop["runs_s"]["trainer_with_saves"])
    assert h["loop_ratio"] == f"{bare / trainer:.3f}"
    assert h["loop_ratio_with_saves"] == f"{bare / saves:.3f}"
    assert h["loop_updates"] == f"{loop['updates']:,}"
