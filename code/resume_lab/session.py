"""Train in a run folder, resuming if possible: the one function behind
`resume-lab train`, the campaign's processes and the benchmark.

It prepares the folder, resumes from `last` or starts fresh, wires the
callbacks, trains, and writes the final files; the caller maps the outcome to
whatever it needs (the CLI: an exit status).
"""

from __future__ import annotations

import io
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from resume_lab import state_keys as keys
from resume_lab.build import build_trainer
from resume_lab.callbacks import Checkpoint, StopAfter, TimeBudget
from resume_lab.config import LabConfig
from resume_lab.events import PREEMPTED, Callback, StopReason
from resume_lab.loop import Trainer
from resume_lab.outputs import write_final
from resume_lab.progress import Progress
from resume_lab.resume import read_checkpoint, resume, store_for
from resume_lab.run_files import FINAL, LAST
from resume_lab.shards import ShardError, check_divisible
from resume_lab.state_file import Saved
from resume_lab.world import World, join, leave


class RunFolderError(Exception):
    """The output folder cannot be used as it is; the message says why and
    what to do instead."""


@dataclass(frozen=True)
class TrainOptions:
    """How to run, as opposed to what to train (LabConfig): changing these
    never blocks a resume. The saving options leave the trajectory bit for
    bit; fixed_reduction=False (DDP's own reduction) may change its bits."""

    folder: Path
    config: LabConfig = field(default_factory=LabConfig)
    save_every: int = 20
    keep: int = 3
    time_budget: float | None = None
    stop_after: int | None = None
    quiet: bool = True
    # distributed: L logical shards (None: the world size at the first
    # start, or the checkpoint's), the engine, asynchronous saves
    shards: int | None = None
    strategy: str = "ddp"
    async_save: bool = False
    fixed_reduction: bool = True
    # False only for the demo's negative control (C): the resume keeps the
    # fresh dropout generators
    restore_rng: bool = True


@dataclass(frozen=True)
class Outcome:
    reason: StopReason
    step: int
    resumed_at: int | None  # the update the run resumed from, if it did
    folder: Path
    rank: int = 0  # only rank 0 reports

    @property
    def preempted(self) -> bool:
        """Stopped early on purpose: `last` is saved; rerunning resumes."""
        return self.reason in PREEMPTED


def writable_folder(path: Path) -> Path:
    """Create `path` if needed and prove it is writable, before any work is
    done."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as err:
        reason = err.strerror or str(err)
        raise RunFolderError(
            f"cannot write to output folder {path}: {reason}; "
            "choose another --output-dir"
        ) from None
    return path


def has_last(folder: Path) -> bool:
    last = folder / LAST
    return last.is_symlink() or last.exists()


# --8<-- [start:train_in_folder]
def train_in_folder(
    options: TrainOptions,
    *,
    extra_callbacks: list[Callback] | None = None,
    log: Callable[[str], None] = lambda line: None,
) -> Outcome:
    """Resume from `folder/last` if there is one, else start; train until
    done or stopped; a finished run also writes final.pt and history.json.
    One process, or every rank of a torchrun launch alike."""
    world = join()
    folder = writable_folder(options.folder)
    resuming = has_last(folder)
    if not resuming and (folder / FINAL).exists():
        raise RunFolderError(
            f"{folder / FINAL} exists but {folder / LAST} does not; "
            "choose a new --output-dir"
        )
    # verified before anything is built: a damaged checkpoint loads nothing
    saved = read_checkpoint(folder / LAST) if resuming else None
    shards = shards_for(options, world, saved)
    trainer = build_trainer(
        options.config,
        init_seed=options.config.seed,
        callbacks=[*callbacks_for(options, world), *(extra_callbacks or [])],
        shards=shards,
        world=world,
        strategy=options.strategy,
        fixed=options.fixed_reduction,
    )
    resumed_at = None
    if saved is not None:
        resumed_at = resume_logged(trainer, saved, options, log)
    reason = trainer.fit(options.config.steps)
    if reason not in PREEMPTED:
        weights = store_for(trainer).whole_model(trainer)  # every rank
        if world.is_writer:
            write_final(trainer, folder, weights)
    step = trainer.step
    del trainer  # the engine's objects go before the group (world.leave)
    leave()
    return Outcome(reason, step, resumed_at, folder, world.rank)


# --8<-- [end:train_in_folder]


def shards_for(
    options: TrainOptions, world: World, saved: Saved | None
) -> int | None:
    """L for this run, or None for the one-process course path (dropout
    from the global RNG). A checkpoint's L wins; a new run takes --shards,
    else the world size under torchrun."""
    last = options.folder / LAST
    stored = None if saved is None else saved.state.get(keys.SHARDS)
    if saved is not None and stored is None and world.size == 1:
        if options.shards is not None:
            raise RunFolderError(
                f"{last} is a one-process checkpoint (no logical shards); "
                "drop --shards to resume it, or choose a new --output-dir"
            )
        return None
    if saved is not None and stored is None:
        raise RunFolderError(
            f"{last} is a one-process checkpoint; resume it without "
            "torchrun, or choose a new --output-dir"
        )
    if stored is not None and options.shards not in (None, stored):
        raise RunFolderError(
            f"{last} was made with --shards {stored}, not {options.shards}; "
            f"drop --shards to resume it"
        )
    shards = stored or options.shards
    if shards is None and world.distributed:
        shards = world.size
    if shards is not None:
        try:
            check_divisible(shards, world.size)
        except ShardError as err:
            raise RunFolderError(str(err)) from None
    return shards


def callbacks_for(options: TrainOptions, world: World) -> list[Callback]:
    # rank 0 speaks for the run; the others keep quiet
    stream = None if world.is_writer else io.StringIO()
    progress = Progress(
        "train", options.config.steps, quiet=options.quiet, stream=stream
    )
    saver = Checkpoint(
        options.folder,
        every=options.save_every,
        keep=options.keep,
        log=progress.line,
        asynchronous=options.async_save,
    )
    callbacks: list[Callback] = [saver]
    if options.time_budget is not None:
        callbacks.append(TimeBudget(options.time_budget))
    if options.stop_after is not None:
        callbacks.append(StopAfter(options.stop_after))
    return [*callbacks, progress]


def resume_logged(
    trainer: Trainer,
    saved: Saved,
    options: TrainOptions,
    log: Callable[[str], None],
) -> int:
    """resume() (verified, configuration checked, RNG last), saying so on
    rank 0; and warning when the thread count differs from the save's."""
    manifest = resume(trainer, saved, restore_rng_state=options.restore_rng)
    if not trainer.world.is_writer:
        return trainer.step
    where = f"{trainer.world.size} process(es), {trainer.shards} shards"
    log(
        f"[train] resumed from {options.folder / LAST} -> "
        f"{saved.checkpoint.name} at update {trainer.step}"
        + (f" on {where}" if trainer.shards is not None else "")
    )
    if manifest.get("threads") != torch.get_num_threads():
        log(
            "[train] warning: saved with "
            f"{manifest.get('threads')} threads, running with "
            f"{torch.get_num_threads()}; results may agree only to "
            "round-off, not bitwise"
        )
    return trainer.step
