"""Resume details: callback state, configuration checks, the Checkpoint callback, stop reasons."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import torch

from resume_lab import state_keys as keys
from resume_lab.build import build_trainer
from resume_lab.callbacks import Callback, Checkpoint, EarlyStopping, StopAfter, TimeBudget
from resume_lab.checkpoint import CheckpointError, load_checkpoint, verify
from resume_lab.compare import tensors_equal
from resume_lab.config import LabConfig
from resume_lab.events import COMPLETED, EARLY_STOPPING, SIGNAL, STOP_AFTER, TIME_BUDGET
from resume_lab.history_log import HISTORY_LOG, TIMING_LOG
from resume_lab.resume import ConfigMismatchError, resume, save_training
from resume_lab.run_folder import BEST, LAST, pointed
from resume_lab.signals import PreemptionFlag

# Evaluating every 2 updates with patience 3 stops this run early (at update 40 here).
EARLY = LabConfig(seed=0, steps=200, eval_every=2, patience=3)


@pytest.fixture(autouse=True)
def one_thread():
    """One torch thread, as the CLI sets by default: faster for this tiny model and far steadier
    on a busy machine (two OpenMP threads spinning on two shared cores slow down many times
    over). The root conftest puts the previous count back after each test."""
    torch.set_num_threads(1)


def early_stopping(trainer) -> EarlyStopping:
    return next(cb for cb in trainer.callbacks if isinstance(cb, EarlyStopping))


def test_early_stopping_state_survives_resume(tmp_path: Path):
    a = build_trainer(EARLY, init_seed=0)
    assert a.fit(EARLY.steps) == EARLY_STOPPING
    stop_step = a.step
    assert 10 < stop_step < EARLY.steps

    # Kill at a point where the patience counter is already running.
    kill_at = next(r["step"] for r in reversed(a.history[: stop_step - 1]) if r["step"] % 2 == 0)
    b = build_trainer(EARLY, init_seed=0)
    b.fit(kill_at)
    saved = early_stopping(b).state_dict()
    assert saved["bad"] > 0, "pick a kill point inside a run of bad evaluations"
    save_training(b, tmp_path)
    del b

    resumed = build_trainer(EARLY, init_seed=1)
    resume(resumed, tmp_path)
    assert early_stopping(resumed).state_dict() == saved
    assert resumed.fit(EARLY.steps) == EARLY_STOPPING
    assert resumed.step == stop_step
    assert early_stopping(resumed).state_dict() == early_stopping(a).state_dict()
    assert tensors_equal(resumed.model.state_dict(), a.model.state_dict())

    # The control: a resume that forgot the callback's state trains past the stop.
    forgetful = build_trainer(EARLY, init_seed=1)
    resume(forgetful, tmp_path)
    forgetful.callbacks[0] = EarlyStopping(EARLY.patience)
    forgetful.fit(EARLY.steps)
    assert forgetful.step > stop_step


def test_resuming_a_stopped_run_stays_stopped(tmp_path: Path):
    a = build_trainer(EARLY, init_seed=0)
    a.fit(EARLY.steps)
    save_training(a, tmp_path)
    again = build_trainer(EARLY, init_seed=0)
    resume(again, tmp_path)
    assert again.fit(EARLY.steps) == EARLY_STOPPING and again.step == a.step


def test_two_callbacks_with_one_state_key_are_refused(tmp_path: Path):
    """One state would overwrite the other in the checkpoint: saving and resuming refuse."""

    class Counter(Callback):
        state_key = "counter"

    class Tally(Counter):  # inherits the key
        pass

    message = "two callbacks have state_key 'counter': Counter and Tally; give one a distinct"
    trainer = build_trainer(LabConfig(steps=4), init_seed=0, callbacks=[Counter(), Tally()])
    trainer.fit(2)
    with pytest.raises(ValueError, match=message):
        save_training(trainer, tmp_path)
    trainer.callbacks = [Counter()]
    save_training(trainer, tmp_path)
    again = build_trainer(LabConfig(steps=4), init_seed=0, callbacks=[Counter(), Tally()])
    with pytest.raises(ValueError, match=message):
        resume(again, tmp_path)
    # with its own key, the second one is saved beside the first
    Tally.state_key = "tally"
    trainer.callbacks = [Counter(), Tally()]
    save_training(trainer, tmp_path)
    state, _ = load_checkpoint(tmp_path / LAST)
    assert set(state[keys.CALLBACKS]) == {"counter", "tally"}


def test_other_configuration_is_refused(tmp_path: Path):
    trainer = build_trainer(LabConfig(steps=20), init_seed=0)
    trainer.fit(5)
    save_training(trainer, tmp_path)
    other = build_trainer(LabConfig(steps=30), init_seed=0)
    with pytest.raises(ConfigMismatchError, match="steps=20 in the file, 30 now"):
        resume(other, tmp_path)


def test_checkpoint_holds_every_named_key(tmp_path: Path):
    trainer = build_trainer(LabConfig(steps=20), init_seed=0)
    trainer.fit(7)
    save_training(trainer, tmp_path)
    state, manifest = load_checkpoint(tmp_path)
    assert set(state) == set(keys.ALL)
    assert state[keys.STEP] == manifest["step"] == 7
    assert state[keys.DATA_POSITION] == {"epoch": 0, "micro": 14, "examples_seen": 7 * 64}
    assert state[keys.SCALER] is None


KEPT = ["step-000027", "step-000030"]


def test_checkpoint_callback_keeps_last_n_and_best(tmp_path: Path):
    config = LabConfig(steps=30, eval_every=5, patience=None)
    saver = Checkpoint(tmp_path, every=3, keep=2)
    (tmp_path / "tmp-step-000004-0a1b2c3d").mkdir()  # left by a killed save
    trainer = build_trainer(config, init_seed=0, callbacks=[saver])
    trainer.fit(config.steps)
    evaluated = [r for r in trainer.history if r["val_accuracy"] is not None]
    best = max(evaluated, key=lambda r: r["val_accuracy"])  # max() keeps the first of equals
    assert best["step"] == saver.best_step and best["step"] % 3 != 0  # a best-only save
    names = sorted(p.name for p in tmp_path.iterdir())
    # Saves at 3, 6, ..., 30 and at each new best: the newest two and the best are kept;
    # no temporary directory survives.
    assert names == sorted([HISTORY_LOG, TIMING_LOG, BEST, LAST, f"step-{best['step']:06d}", *KEPT])
    assert pointed(tmp_path, LAST) == tmp_path / "step-000030"
    assert verify(tmp_path / LAST)["step"] == 30
    best_state, _ = load_checkpoint(tmp_path / BEST)
    assert best_state[keys.STEP] == best["step"]


def test_a_save_for_a_new_best_alone_moves_last_too(tmp_path: Path):
    """`last` names the newest checkpoint: a kill after a best-only save resumes from it."""
    config = LabConfig(steps=7, eval_every=5, patience=None)
    saver = Checkpoint(tmp_path, every=10)
    seen: dict[int, Path | None] = {}

    class Watch(Callback):  # after the saver, at each boundary
        def on_boundary(self, trainer):
            seen[trainer.step] = pointed(tmp_path, LAST)

    callbacks = [saver, Watch(), StopAfter(6)]
    build_trainer(config, init_seed=0, callbacks=callbacks).fit(config.steps)
    assert saver.best_step == 5  # the first evaluation is a new best, off the schedule
    assert pointed(tmp_path, BEST) == tmp_path / "step-000005"
    assert seen[4] is None  # no save yet
    assert seen[5] == tmp_path / "step-000005"  # the best-only save moved last at once
    assert verify(tmp_path / LAST)["step"] == 6  # the end of fit saved again


@pytest.mark.parametrize("every, keep", [(10, 0), (0, 3), (-1, 1)])
def test_checkpoint_refuses_a_cadence_or_keep_below_one(tmp_path: Path, every, keep):
    with pytest.raises(ValueError, match="both must be 1 or more"):
        Checkpoint(tmp_path, every=every, keep=keep)


def test_best_moves_before_last(tmp_path: Path, monkeypatch):
    """`last`'s state says which update is best: that checkpoint must be named first."""
    swaps: list[str] = []
    real_replace = os.replace

    def replace(src, dst):
        swaps.append(Path(dst).name)
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    config = LabConfig(steps=4, eval_every=2, patience=None)
    trainer = build_trainer(config, init_seed=0, callbacks=[Checkpoint(tmp_path, every=2)])
    trainer.fit(config.steps)
    assert swaps[:2] == [BEST, LAST]  # update 2: the first evaluation is always a new best


def test_a_resumed_history_log_equals_the_uninterrupted_one(tmp_path: Path):
    config = LabConfig(steps=24, eval_every=4, patience=None)
    whole = build_trainer(config, init_seed=0, callbacks=[Checkpoint(tmp_path / "a", every=3)])
    whole.fit(config.steps)

    saver = Checkpoint(tmp_path / "b", every=3)
    first = build_trainer(config, init_seed=0, callbacks=[saver])
    first.fit(12)  # `last` names update 12
    first.callbacks.remove(saver)
    first.fit(14)
    first.callbacks.append(saver)
    save_training(first, tmp_path / "b", pointers=())  # a killed run's save, never named
    log = tmp_path / "b" / HISTORY_LOG
    assert len(log.read_bytes().splitlines()) == 14  # two records past what last names
    resumed = build_trainer(config, init_seed=1, callbacks=[Checkpoint(tmp_path / "b", every=3)])
    resume(resumed, tmp_path / "b")
    assert resumed.step == 12 and len(resumed.history) == 12
    resumed.fit(config.steps)
    assert log.read_bytes() == (tmp_path / "a" / HISTORY_LOG).read_bytes()


def test_a_damaged_history_log_is_refused(tmp_path: Path):
    trainer = build_trainer(LabConfig(steps=20), init_seed=0)
    trainer.fit(5)
    save_training(trainer, tmp_path)
    log = tmp_path / HISTORY_LOG
    log.write_bytes(log.read_bytes().replace(b'"step": 3', b'"step": 8'))
    with pytest.raises(CheckpointError, match=r"history\.jsonl: expected its first \d+ bytes"):
        resume(build_trainer(LabConfig(steps=20), init_seed=0), tmp_path)


def checkpoint_size(tmp_path: Path, steps: int) -> int:
    config = LabConfig(steps=1000, eval_every=20, patience=None)
    trainer = build_trainer(config, init_seed=0)
    trainer.fit(steps)
    folder = save_training(trainer, tmp_path / f"at-{steps}")
    return sum(f.stat().st_size for f in folder.iterdir())


def test_checkpoint_size_does_not_grow_with_the_run(tmp_path: Path):
    small, large = checkpoint_size(tmp_path, 10), checkpoint_size(tmp_path, 200)
    assert abs(large - small) / small < 0.01


@pytest.mark.slow
def test_a_checkpoint_at_update_1000_is_the_size_of_one_at_update_10(tmp_path: Path):
    small, large = checkpoint_size(tmp_path, 10), checkpoint_size(tmp_path, 1000)
    assert abs(large - small) / small < 0.01


def test_saving_does_not_change_the_trajectory(tmp_path: Path):
    config = LabConfig(steps=12, eval_every=3)
    plain = build_trainer(config, init_seed=0)
    plain.fit(config.steps)
    saving = build_trainer(config, init_seed=0, callbacks=[Checkpoint(tmp_path, every=1, keep=1)])
    saving.fit(config.steps)
    assert tensors_equal(plain.model.state_dict(), saving.model.state_dict())


def test_stop_after_and_time_budget_stop_at_a_boundary():
    config = LabConfig(steps=50)
    trainer = build_trainer(config, init_seed=0, callbacks=[StopAfter(7)])
    assert trainer.fit(config.steps) == STOP_AFTER and trainer.step == 7
    assert trainer.fit(config.steps) == STOP_AFTER and trainer.step == 14  # counts per fit()

    ticks = iter(range(1000))  # a fake clock: one second per call
    budget = TimeBudget(10.0, clock=lambda: float(next(ticks)))
    timed = build_trainer(config, init_seed=0, callbacks=[budget])
    assert timed.fit(config.steps) == TIME_BUDGET
    assert timed.step == 8  # 9 s elapsed + 1 s for the next update would reach the budget


class SendSignal(Callback):
    """Deliver a real signal to this process in the middle of update `at`."""

    def __init__(self, at: int, signum: int, times: int = 1) -> None:
        self.at, self.signum, self.times = at, signum, times

    def on_step_end(self, trainer) -> None:
        if trainer.step == self.at:
            for _ in range(self.times):
                os.kill(os.getpid(), self.signum)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_at_the_next_boundary_and_saves(tmp_path: Path, signum, capfd):
    config = LabConfig(steps=40)
    previous = signal.getsignal(signum)
    flag = PreemptionFlag()
    with flag.installed():
        callbacks = [
            Checkpoint(tmp_path, every=100),
            SendSignal(at=9, signum=signum, times=2),
            flag,  # a stop condition like any other: it asks at the boundary
        ]
        trainer = build_trainer(config, init_seed=0, callbacks=callbacks)
        assert trainer.fit(config.steps) == SIGNAL
    assert signal.getsignal(signum) is previous  # handlers are put back
    assert trainer.step == 9
    assert verify(tmp_path / LAST)["step"] == 9
    assert "again" in capfd.readouterr().err  # the second signal was acknowledged, not obeyed

    resumed = build_trainer(config, init_seed=3)
    resume(resumed, tmp_path)
    assert resumed.fit(config.steps) == COMPLETED
    reference = build_trainer(config, init_seed=0)
    reference.fit(config.steps)
    assert tensors_equal(reference.model.state_dict(), resumed.model.state_dict())
    assert not torch.is_inference_mode_enabled()


def test_data_order_from_an_argument_breaks_the_resume(tmp_path: Path):
    """The course's first bug: the resumed run took its shuffle seed from its own (seed + 1)
    argument. Everything else exact, the losses part at the first update after the kill."""
    from resume_lab.compare import first_divergent_step

    config = LabConfig(seed=0, steps=30)
    a = build_trainer(config, init_seed=0)
    a.fit(config.steps)
    b = build_trainer(config, init_seed=0)
    b.fit(12)
    save_training(b, tmp_path)
    buggy = build_trainer(config, init_seed=1)
    resume(buggy, tmp_path)
    buggy.sampler.seed = 1  # as if the sampler had been built from this process's seed
    buggy.fit(config.steps)
    assert first_divergent_step(a.history, buggy.history) == 13


def test_progress_bar_only_on_a_terminal_and_not_quiet():
    import io

    from resume_lab.progress import Progress

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert not Progress("x", 10, stream=io.StringIO()).bar
    assert Progress("x", 10, stream=Terminal()).bar
    assert not Progress("x", 10, stream=Terminal(), quiet=True).bar
    stream = Terminal()
    trainer = build_trainer(
        LabConfig(steps=3), init_seed=0, callbacks=[Progress("x", 3, stream=stream)]
    )
    trainer.fit(3)
    assert "\r[x] ###" in stream.getvalue() and stream.getvalue().endswith(
        "completed at update 3\n"
    )
