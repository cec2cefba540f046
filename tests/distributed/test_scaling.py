"""Exact resume under torchrun: same world, elastic, across engines, on a
signal, with asynchronous saves; and the negative control that shows why the
lab's reduction exists. Each case compares final.pt, history.json and
history.jsonl byte for byte with an uninterrupted run."""

from __future__ import annotations

import json
import os
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from torchrun import TIMEOUT, lab_command, launch, same_outputs, train

from resume_lab.launcher import Running

EXIT_PREEMPTED = 75
# SCALING_RESULTS=path: the cases and outcomes, for the Scaling out page
RESULTS: list[dict[str, Any]] = []


@pytest.fixture(scope="module", autouse=True)
def write_results() -> Iterator[None]:
    yield
    target = os.environ.get("SCALING_RESULTS")
    if target and RESULTS:
        from bench import provenance

        started = provenance.start()
        data = provenance.finish(started, cases=RESULTS)
        tmp = Path(target).with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1) + "\n")
        tmp.replace(target)


def record(
    case: str,
    worlds: list[int],
    strategies: list[str],
    shards: int,
    reduction: str,
    differing: list[str],
) -> None:
    RESULTS.append(
        {
            "case": case,
            "worlds": worlds,
            "strategies": strategies,
            "shards": shards,
            "reduction": reduction,
            "bitwise": differing == [],
            "differing": differing,
        }
    )


RUN = ("--steps", "24", "--save-every", "6")


def uninterrupted(tmp: Path, world: int, *extra: str) -> Path:
    folder = tmp / f"whole-w{world}{''.join(extra)}"
    done = train(world, folder, *RUN, *extra)
    assert done.returncode == 0, done.stderr[-3000:]
    return folder


def stop_then_resume(
    folder: Path,
    worlds: list[int],
    stops: list[int],
    *extra: str,
    strategies: list[str] | None = None,
) -> None:
    """Run at worlds[0] until stops[0] updates, then at worlds[1] ... the
    last world runs to the end."""
    strategies = strategies or ["ddp"] * len(worlds)
    for i, world in enumerate(worlds):
        stop = ["--stop-after", str(stops[i])] if i < len(stops) else []
        run = train(world, folder, *RUN, "--strategy", strategies[i], *stop, *extra)
        expected = (EXIT_PREEMPTED if world == 1 else 1) if stop else 0
        assert run.returncode == expected, run.stderr[-3000:]


# --- quick tier: make test-all's (heavy), each test launches torchrun ----------


@pytest.mark.heavy
def test_a_run_stopped_at_two_ranks_resumes_bitwise_in_one_process(tmp_path: Path) -> None:
    whole = uninterrupted(tmp_path, 2)
    folder = tmp_path / "elastic"
    stop_then_resume(folder, [2, 1], [10])
    differing = same_outputs(whole, folder)
    record("elastic", [2, 1], ["ddp"] * 2, 2, "fixed", differing)
    assert differing == []


def refusal_lines(stderr: str) -> list[str]:
    """The lab's error lines, one from each rank that logged before torchrun stopped it."""
    return [line for line in stderr.splitlines() if line.startswith("resume-lab train: error")]


@pytest.mark.heavy
def test_shards_that_the_world_size_does_not_divide_are_refused_in_one_line(tmp_path: Path) -> None:
    """At a first start (--shards 3 at W = 2) and at a resume (a checkpoint of L = 4 at W = 3):
    every rank's message is the same single line, naming the world sizes that work."""
    run = train(2, tmp_path / "run", "--steps", "4", "--shards", "3")
    lines = refusal_lines(run.stderr)
    assert lines and set(lines) == {
        "resume-lab train: error: 3 logical shards cannot be split over 2 "
        "processes; this run works at world sizes 1, 3"
    }, run.stderr[-2000:]
    assert re.search(r"exitcode\s*:\s*2\b", run.stderr), run.stderr[-2000:]

    folder = tmp_path / "resumed"
    stop_then_resume(folder, [2], [1], "--shards", "4")
    assert (folder / "last").exists()
    resumed = train(3, folder, *RUN)
    lines = refusal_lines(resumed.stderr)
    assert lines and set(lines) == {
        "resume-lab train: error: 4 logical shards cannot be split over 3 "
        "processes; this run works at world sizes 1, 2, 4"
    }, resumed.stderr[-2000:]
    assert re.search(r"exitcode\s*:\s*2\b", resumed.stderr), resumed.stderr[-2000:]


# --- slow tier ----------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_same_world_resume_at_two_ranks_is_bitwise(tmp_path: Path, strategy: str) -> None:
    whole = uninterrupted(tmp_path, 2, "--strategy", strategy)
    folder = tmp_path / "resumed"
    stop_then_resume(folder, [2, 2], [9], strategies=[strategy, strategy])
    differing = same_outputs(whole, folder)
    record("same world", [2, 2], [strategy] * 2, 2, "fixed", differing)
    assert differing == []


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_same_world_resume_at_four_ranks_is_bitwise(tmp_path: Path, strategy: str) -> None:
    whole = uninterrupted(tmp_path, 4, "--strategy", strategy)
    folder = tmp_path / "resumed"
    stop_then_resume(folder, [4, 4], [9], strategies=[strategy, strategy])
    differing = same_outputs(whole, folder)
    record("same world", [4, 4], [strategy] * 2, 4, "fixed", differing)
    assert differing == []


@pytest.mark.slow
def test_elastic_two_to_four_and_four_to_two_to_one_match_the_whole_run(tmp_path: Path) -> None:
    whole = uninterrupted(tmp_path, 4)  # L = 4
    up = tmp_path / "2-4"
    stop_then_resume(up, [2, 4], [7], "--shards", "4")
    differing_up = same_outputs(whole, up)
    record("elastic", [2, 4], ["ddp"] * 2, 4, "fixed", differing_up)
    down = tmp_path / "4-2-1"
    stop_then_resume(down, [4, 2, 1], [5, 8])
    differing_down = same_outputs(whole, down)
    record("elastic", [4, 2, 1], ["ddp"] * 3, 4, "fixed", differing_down)
    assert differing_up == [] and differing_down == []


@pytest.mark.slow
@pytest.mark.parametrize(
    "engines", [["ddp", "fsdp"], ["fsdp", "ddp"]], ids=["ddp-to-fsdp", "fsdp-to-ddp"]
)
def test_a_checkpoint_resumes_under_the_other_engine_bitwise(
    tmp_path: Path, engines: list[str]
) -> None:
    whole = uninterrupted(tmp_path, 2)
    folder = tmp_path / "switched"
    stop_then_resume(folder, [2, 2], [11], strategies=engines)
    differing = same_outputs(whole, folder)
    record("engine switch", [2, 2], engines, 2, "fixed", differing)
    assert differing == []


@pytest.mark.slow
def test_ddps_own_reduction_at_four_ranks_is_not_bitwise_after_a_resume(tmp_path: Path) -> None:
    """The negative control: the fixed-order reduction is what makes the
    other tests pass."""
    whole = uninterrupted(tmp_path, 4, "--reduction", "engine")
    folder = tmp_path / "resumed"
    stop_then_resume(folder, [4, 4], [9], "--reduction", "engine")
    differing = same_outputs(whole, folder)
    record("negative control", [4, 4], ["ddp"] * 2, 4, "engine", differing)
    assert "final.pt" in differing


@pytest.mark.slow
def test_async_saves_resume_bitwise(tmp_path: Path) -> None:
    whole = uninterrupted(tmp_path, 2)
    folder = tmp_path / "async"
    stop_then_resume(folder, [2, 2], [13], "--async-save")
    differing = same_outputs(whole, folder)
    record("async save", [2, 2], ["ddp"] * 2, 2, "fixed", differing)
    assert differing == []
    verified = launch(1, ["verify", str(folder / "last")])
    assert verified.returncode == 0, verified.stderr


@pytest.mark.slow
def test_sigterm_to_the_torchrun_group_stops_every_rank_at_one_boundary(tmp_path: Path) -> None:
    whole = uninterrupted(tmp_path, 2, "--steps", "400")
    folder = tmp_path / "signalled"
    args = ["train", "--output-dir", str(folder), "--quiet", *RUN, "--steps", "400"]
    with Running(lab_command(2, args), logs=tmp_path / "signalled-logs") as running:
        deadline = time.monotonic() + 120
        while not (folder / "last").exists():
            assert time.monotonic() < deadline, "no checkpoint in 120 s"
            time.sleep(0.1)
        running.signal(signal.SIGTERM)  # torchrun's whole group
        running.wait(TIMEOUT)
        err = running.stderr()
    # torchrun, signalled itself, does not report its ranks' statuses; rank 0
    # says where all of them stopped: a collective save needs every rank at
    # the same update, and its checkpoint holds both ranks' pieces
    stopped = re.search(r"stopped by a signal at update (\d+)", err)
    assert stopped and err.count("stopped by a signal") == 1, err[-3000:]
    assert os.readlink(folder / "last") == f"step-{int(stopped[1]):06d}"
    assert sorted(p.name for p in (folder / "last").glob("*.distcp")) == [
        "__0_0.distcp",
        "__1_0.distcp",
    ]
    assert not (folder / "final.pt").exists()
    rerun = train(2, folder, *RUN, "--steps", "400")
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    differing = same_outputs(whole, folder)
    record("SIGTERM", [2, 2], ["ddp"] * 2, 2, "fixed", differing)
    assert differing == []
