"""Campaign, parts 5 and 7: exact resume at every kill point; evaluation that changes nothing.

Part 5: for K = 1, 2 and 3 micro-batches per update (K = 3 ends every 50-micro-batch epoch with
a window of 2), one uninterrupted run saves a checkpoint at every update k; a fresh trainer,
built from another seed as a new process would, resumes from each and finishes. Every resumed
run must equal the uninterrupted one bitwise: parameters, optimizer state, schedule, data
position, callback state, RNG states and the per-update history. The negative control resumes
without the RNG state and must leave the path at update k + 1, the first dropout mask after the
kill; without dropout, the same resume stays on it. The full run adds resumes in new processes
through `python -m resume_lab train`.

Part 7: evaluating every update, every 20 updates or never leaves the training trajectory and
every RNG state bitwise identical.
"""

from __future__ import annotations

import itertools
import random
import subprocess
from pathlib import Path
from typing import Any

import pytest
import torch
from campaign import lab_command, record, trainer_state

from resume_lab import state_keys as keys
from resume_lab.build import build_trainer
from resume_lab.callbacks import Callback
from resume_lab.cli import EXIT_OK, EXIT_PREEMPTED, main
from resume_lab.compare import first_divergent_step, tensors_equal
from resume_lab.config import LabConfig
from resume_lab.history_log import HISTORY_LOG, HistoryLog
from resume_lab.resume import resume, save_training
from resume_lab.run_folder import LAST, checkpoint_name

FULL = pytest.mark.full
MODES = ["quick", pytest.param("full", marks=FULL)]
ACCUMULATIONS = (1, 2, 3)
STEPS = {"quick": 20, "full": 60}


@pytest.fixture(autouse=True)
def one_thread():
    torch.set_num_threads(1)


class SaveAt(Callback):
    """Commits a checkpoint directory at the boundary of each update in `steps`, all in one run
    folder with one history log."""

    def __init__(self, folder: Path, steps: set[int]) -> None:
        self.folder, self.steps = folder, steps
        self.log = HistoryLog(folder / HISTORY_LOG)

    def on_boundary(self, trainer) -> None:
        if trainer.step in self.steps:
            save_training(trainer, self.folder, log=self.log, pointers=())


def kill_points(mode: str, accum: int, steps: int) -> list[int]:
    if mode == "full":
        return list(range(1, steps))
    # Quick: the first update, around K = 3's short window (updates 16, 17), the last.
    return [1, 16, 17, steps - 1] if accum == 3 else [1, 10, steps - 1]


def resume_campaign(folder: Path, mode: str, accum: int, steps: int) -> dict[str, Any]:
    config = LabConfig(steps=steps, accum=accum, eval_every=3, patience=100)
    points = kill_points(mode, accum, steps)
    saver = SaveAt(folder, set(points))
    reference = build_trainer(config, init_seed=config.seed, callbacks=[saver])
    reference.fit(steps)
    expected = trainer_state(reference)
    seen = [0] + [record["examples_seen"] for record in reference.history]
    window = [after - before for before, after in itertools.pairwise(seen)]
    if accum == 3:  # every 17th update sees 2 micro-batches: 64 examples, not 96
        assert [s for s, n in enumerate(window, 1) if n != 96] == [17, 34, 51][: steps // 17]

    mismatches = []
    for k in points:
        resumed = build_trainer(config, init_seed=1000 + k)  # a new process's own seed
        resume(resumed, folder / checkpoint_name(k))
        resumed.fit(steps)
        if not tensors_equal(trainer_state(resumed), expected):
            mismatches.append(k)

        control = build_trainer(config, init_seed=1000 + k)
        resume(control, folder / checkpoint_name(k), restore_rng_state=False)
        control.fit(k + 1)  # one update is enough to see it leave the path
        assert first_divergent_step(reference.history[: k + 1], control.history) == k + 1, k
    return {"points": len(points), "mismatches": mismatches}


@pytest.mark.parametrize("mode", MODES)
def test_resume_at_every_kill_point_is_bitwise_exact(tmp_path: Path, mode):
    steps = STEPS[mode]
    results = {}
    for accum in ACCUMULATIONS:
        (tmp_path / f"K{accum}").mkdir()
        results[accum] = resume_campaign(tmp_path / f"K{accum}", mode, accum, steps)
        mismatches = results[accum]["mismatches"]
        assert mismatches == [], f"K={accum}: resumed runs differ after kill points {mismatches}"
    if mode == "full":
        ran = [str(accum) for accum in results]  # the factors this run covered
        record(
            "kill_points",
            count=sum(r["points"] for r in results.values()),
            per_accumulation=steps - 1,
            steps=steps,
            accumulations=f"{', '.join(ran[:-1])} and {ran[-1]}",
            negative_controls=sum(r["points"] for r in results.values()),
            losses=sum(len(r["mismatches"]) for r in results.values()),
            compared=f"{tensors_equal.__module__}.{tensors_equal.__qualname__}",
        )


def test_without_dropout_a_resume_needs_no_rng_state(tmp_path: Path):
    """The negative control's divergence is dropout's: with dropout off, the same resume
    without the RNG state stays bitwise on the uninterrupted path."""
    config = LabConfig(steps=20, accum=3, eval_every=5, dropout=0.0)
    reference = build_trainer(config, init_seed=0)
    reference.fit(10)
    save_training(reference, tmp_path)
    reference.fit(20)
    control = build_trainer(config, init_seed=7)
    resume(control, tmp_path / LAST, restore_rng_state=False)
    control.fit(20)
    assert tensors_equal(control.model.state_dict(), reference.model.state_dict())
    assert first_divergent_step(reference.history, control.history) is None


@FULL
def test_resume_in_a_new_process_is_bitwise_exact(tmp_path: Path, capsys):
    """`python -m resume_lab train --stop-after k`, then the same command in a new process,
    for each K at a random kill point; compared with an uninterrupted run, file by file."""
    rng = random.Random("new-process-resumes")
    steps = 60
    commands = {}
    for accum in ACCUMULATIONS:
        kill_at = rng.randrange(1, steps)
        args = ["train", "--steps", str(steps), "--accum", str(accum), "--quiet"]
        assert main([*args, "--output-dir", str(tmp_path / f"whole-{accum}")]) == EXIT_OK
        commands[accum] = [*args, "--output-dir", str(tmp_path / f"pieces-{accum}")], kill_at
    capsys.readouterr()
    for extra, code in ((("--stop-after",), EXIT_PREEMPTED), ((), EXIT_OK)):
        running = [
            subprocess.Popen(
                lab_command(*args, *(e for e in extra for e in (e, str(kill_at)))),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for args, kill_at in commands.values()
        ]
        for child in running:
            _, err = child.communicate(timeout=300)
            assert child.returncode == code, err
            assert "Traceback" not in err
    for accum in ACCUMULATIONS:
        for name in ("final.pt", "history.json"):
            whole = (tmp_path / f"whole-{accum}" / name).read_bytes()
            assert (tmp_path / f"pieces-{accum}" / name).read_bytes() == whole, (accum, name)
    record("new_process_resumes", count=len(ACCUMULATIONS), losses=0)


# --- part 7 -----------------------------------------------------------------------------------


def trajectory(config: LabConfig) -> dict:
    """Everything a run leaves except what evaluation itself writes (its metrics, its cadence)."""
    trainer = build_trainer(config, init_seed=config.seed)
    trainer.fit(config.steps)
    state = trainer_state(trainer)
    state[keys.HISTORY] = [
        {k: v for k, v in r.items() if not k.startswith("val_")} for r in state[keys.HISTORY]
    ]
    del state[keys.CONFIG]
    return state


@pytest.mark.parametrize("mode", MODES)
def test_evaluation_cadence_leaves_training_and_every_rng_untouched(mode):
    seeds, accums, steps = ((0,), (3,), 20) if mode == "quick" else ((0, 1, 2), ACCUMULATIONS, 60)
    runs = 0
    for seed in seeds:
        for accum in accums:
            base = dict(seed=seed, accum=accum, steps=steps, patience=None)
            reference = trajectory(LabConfig(**base, eval_every=20))
            for cadence in (1, 0):  # every update; never
                assert tensors_equal(trajectory(LabConfig(**base, eval_every=cadence)), reference)
            runs += 3
    if mode == "full":
        record("evaluation", runs=runs, cadences="every update, every 20 updates, never", losses=0)
