"""The course's contracts for runs A, B and C: bitwise resume, and a negative control."""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from resume_lab.cli import main
from resume_lab.compare import first_divergent_step, tensors_equal
from resume_lab.config import LabConfig
from resume_lab.experiment import run_interrupted, run_uninterrupted
from resume_lab.loop import DETERMINISTIC_FIELDS
from resume_lab.model import NUM_PARAMETERS
from resume_lab.outputs import read_history
from resume_lab.resume import training_state


@contextmanager
def global_rng_preserved() -> Iterator[None]:
    """For fixtures wider than one test: leave the three global RNGs as they were found."""
    saved = torch.get_rng_state(), random.getstate(), np.random.get_state()
    try:
        yield
    finally:
        torch.set_rng_state(saved[0])
        random.setstate(saved[1])
        np.random.set_state(saved[2])


@pytest.fixture(autouse=True)
def one_thread():
    """One torch thread, as the CLI sets by default: faster for this tiny model and far steadier
    on a busy machine (two OpenMP threads spinning on two shared cores slow down many times
    over). The root conftest puts the previous count back after each test."""
    torch.set_num_threads(1)


REPORT_KEYS = {
    "bitwise_equal",
    "curves_equal",
    "negative_control_differs",
    "first_divergent_step",
    "checkpoint_bytes",
    "val_accuracy",
    "versions",
    "threads",
}


@pytest.fixture(scope="module")
def default_demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict[str, Any], Path]:
    """`resume-lab demo` with its defaults, run once: (exit code, report.json, output folder)."""
    out = tmp_path_factory.mktemp("demo")
    threads = torch.get_num_threads()
    with global_rng_preserved():
        code = main(["demo", "--output-dir", str(out), "--quiet"])  # sets one thread
    torch.set_num_threads(threads)
    return code, json.loads((out / "report.json").read_text("utf8")), out


def deterministic(history: list[dict]) -> list[dict]:
    return [{field: record[field] for field in DETERMINISTIC_FIELDS} for record in history]


def test_default_demo_report(default_demo):
    code, report, _ = default_demo
    assert code == 0
    assert report.keys() >= REPORT_KEYS
    assert report["bitwise_equal"] and report["optimizer_equal"] and report["curves_equal"]
    assert report["final_files_identical"]  # torch.save is deterministic: same tensors, same bytes
    assert report["negative_control_differs"]
    # C differs from the first update after the kill: its dropout masks come from the wrong stream.
    assert report["first_divergent_step"] == report["kill_at"] + 1 == 51
    assert report["val_accuracy"] > 0.8
    assert report["threads"] == torch.get_num_threads()


def test_default_demo_files(default_demo):
    _, report, out = default_demo
    for run in "ABC":
        weights = torch.load(out / run / "final.pt", weights_only=True)
        assert type(weights) is dict and all(isinstance(t, torch.Tensor) for t in weights.values())
        assert sum(t.numel() for t in weights.values()) == NUM_PARAMETERS
        assert len(read_history(out / run)) == report["steps_done"][run] == 120
    assert (out / "A" / "history.json").read_bytes() == (out / "B" / "history.json").read_bytes()
    assert (out / "A" / "history.json").read_bytes() != (out / "C" / "history.json").read_bytes()
    # B/last names the checkpoint directory of the kill point
    assert os.readlink(out / "B" / "last") == f"step-{report['kill_at']:06d}"
    assert sorted(os.listdir(out / "B" / "last")) == ["manifest.json", "state.pt"]
    leftovers = [p for p in out.rglob("*") if "tmp" in p.name]
    assert leftovers == []


def test_checkpoint_loads_with_plain_weights_only(default_demo):
    _, _, out = default_demo
    for path in (out / "B" / "last" / "state.pt", out / "A" / "final.pt"):
        # Nothing in the file needs an allowlist, not even torch's own pre-registered classes.
        assert torch.serialization.get_unsafe_globals_in_checkpoint(path) == []
        torch.load(path, weights_only=True, map_location="cpu")


def test_checkpoint_bytes_breakdown(default_demo):
    _, report, out = default_demo
    sizes = report["checkpoint_bytes"]
    directory = out / "B" / "last"
    assert sizes["total"] == sum(f.stat().st_size for f in directory.iterdir())
    assert report["checkpoint"]["files"]["state.pt"]["bytes"] == (
        (directory / "state.pt").stat().st_size
    )
    assert sizes["parameters"] == 4 * NUM_PARAMETERS == 22_032
    assert sizes["optimizer_moments"] == 2 * sizes["parameters"]  # Adam: twice the model
    assert sizes["rng_torch"] == 5_056
    assert sizes["rng_numpy"] == 624 * 8  # the MT19937 key, stored as int64
    assert sizes["rng_python"] == 625 * 8
    parts = ("parameters", "optimizer_moments", "rng_torch", "rng_numpy", "rng_python", "rest")
    assert sum(sizes[p] for p in parts) == sizes["total"]
    assert sizes["other_tensors"] == 6 * 4  # AdamW's float32 step count per parameter tensor


# (seed, steps, kill_at, accum). 50 micro-batches per epoch: accum=3 ends each epoch with a
# window of 2 (update 17), accum=4 with a window of 2 (update 13).
CASES = [
    (1, 40, 17, 3),  # killed right after the short tail window
    (2, 36, 16, 3),  # killed right before it: the resumed run starts with the short window
    (3, 30, 1, 1),  # killed after the very first update
    (4, 30, 29, 4),  # killed one update before the end
    (5, 60, 25, 2),  # killed exactly at an epoch boundary
]


@pytest.mark.parametrize(("seed", "steps", "kill_at", "accum"), CASES)
def test_resume_is_bitwise_exact(tmp_path: Path, seed, steps, kill_at, accum):
    config = LabConfig(seed=seed, steps=steps, accum=accum, eval_every=5)
    a = run_uninterrupted(config, tmp_path / "A")
    b = run_interrupted(config, kill_at, tmp_path / "B")
    assert tensors_equal(a.model.state_dict(), b.model.state_dict())
    assert tensors_equal(a.optimizer.state_dict(), b.optimizer.state_dict())
    assert tensors_equal(a.scheduler.state_dict(), b.scheduler.state_dict())
    assert deterministic(a.history) == deterministic(b.history)
    assert (a.epoch, a.micro, a.examples_seen) == (b.epoch, b.micro, b.examples_seen)
    # Composer-style zero tolerance: the whole end state, RNGs and callbacks included.
    # (the history, compared above, lives in the run folder's log: no mark to compare here)
    assert tensors_equal(training_state(a, {}), training_state(b, {}))
    assert (tmp_path / "A" / "final.pt").read_bytes() == (tmp_path / "B" / "final.pt").read_bytes()
    assert (tmp_path / "A" / "history.json").read_bytes() == (
        tmp_path / "B" / "history.json"
    ).read_bytes()


def test_negative_control_reports_first_divergence(tmp_path: Path):
    config = LabConfig(seed=7, steps=30, accum=3)
    a = run_uninterrupted(config, tmp_path / "A")
    c = run_interrupted(config, 12, tmp_path / "C", restore_rng=False)
    assert not tensors_equal(a.model.state_dict(), c.model.state_dict())
    assert first_divergent_step(a.history, c.history) == 13
    # Up to the kill, C is A: the divergence is the RNG's, nothing else's.
    assert deterministic(a.history[:12]) == deterministic(c.history[:12])


def test_short_tail_window_is_scaled_exactly():
    """Update 17 with accum=3 sees 2 micro-batches (64 examples): its gradient must be the
    mean-loss gradient over those 64, not a mean of micro-batch means divided by 3."""
    from resume_lab.build import build_trainer

    config = LabConfig(steps=40, accum=3, dropout=0.0, max_norm=1e9, eval_every=0)
    trainer = build_trainer(config, init_seed=0)
    trainer.fit(16)
    assert (trainer.epoch, trainer.micro) == (0, 48)
    indices = torch.cat(list(trainer.sampler.batches(0, 48)))
    assert len(indices) == 64
    x, y = trainer.data.x_train[indices], trainer.data.y_train[indices]
    loss = torch.nn.functional.cross_entropy(trainer.model(x), y)
    grads = torch.autograd.grad(loss, list(trainer.model.parameters()))
    expected_norm = torch.linalg.vector_norm(torch.cat([g.flatten() for g in grads]))
    trainer.fit(17)
    record = trainer.history[-1]
    assert record["examples_seen"] - trainer.history[-2]["examples_seen"] == 64
    assert record["loss"] == pytest.approx(loss.item(), rel=1e-6)
    assert record["grad_norm"] == pytest.approx(expected_norm.item(), rel=1e-5)
    assert (trainer.epoch, trainer.micro) == (1, 0)
