"""Command line: `python -m resume_lab [demo|train|verify]` (also installed as
`resume-lab`).

The contract other tools rely on:

- demo (the default) writes DIR/{A,B,C}/final.pt (a flat dict of tensors),
  history.json (one record per update: step, loss, grad_norm, lr,
  examples_seen, val_loss, val_accuracy), timing.json (step, step_time),
  DIR/B/last (the pointer to B's checkpoint at the kill point), and
  DIR/report.json. With --world-size W >= 2, A, B and C are `train` run
  folders made under torchrun, and DIR/B1 is B's stop resumed by one
  process.
- train writes checkpoint directories DIR/step-NNNNNN/ (state.pt and
  manifest.json), the pointers DIR/last (what a restart resumes from) and
  DIR/best, the log DIR/history.jsonl, and, once finished, final.pt,
  history.json and timing.json. history.json holds only fields that are a
  pure function of the configuration, so an interrupted-and-resumed run's
  file is byte-identical to an uninterrupted one's; wall-clock step times
  live in timing.json.
- verify PATH checks every file of a checkpoint against its manifest before
  unpickling anything; PATH is a run folder, a pointer, a checkpoint
  directory or final.pt.
- Exit codes: see exit_codes.py and `--help`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from resume_lab import state_keys as keys
from resume_lab.atomic import SaveError
from resume_lab.checkpoint import (
    CheckpointError,
    load_checkpoint,
    locate,
    verify,
)
from resume_lab.config import ConfigError, LabConfig
from resume_lab.distributed_demo import (
    DemoPlan,
    distributed_passed,
    format_distributed_report,
    run_distributed_demo,
)
from resume_lab.exit_codes import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_PREEMPTED,
    EXIT_REJECTED,
    EXIT_SAVE_FAILED,
    EXIT_USAGE,
)
from resume_lab.experiment import (
    default_kill_at,
    demo_passed,
    format_report,
    run_demo,
)
from resume_lab.launcher import LaunchError
from resume_lab.outputs import write_json
from resume_lab.parser import build_parser
from resume_lab.resume import ConfigMismatchError, read_checkpoint
from resume_lab.run_files import FINAL, LAST
from resume_lab.run_folder import committed
from resume_lab.session import (
    RunFolderError,
    TrainOptions,
    train_in_folder,
    writable_folder,
)
from resume_lab.signals import PreemptionFlag
from resume_lab.state_file import Saved

# B1 is the distributed demo's (--world-size W >= 2)
DEMO_ENTRIES = {"A", "B", "B1", "C", "report.json"}


class UsageError(Exception):
    """A problem with the command line or its paths; main() prints it on one
    line, exit 2."""


def log(message: str) -> None:
    # One write per line: under torchrun every rank shares this stream, and
    # print() writes the text and its newline in two calls, so two ranks'
    # lines could run together.
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def demo_kill_at(args: argparse.Namespace) -> int:
    kill_at = args.kill_at
    if kill_at is None:
        kill_at = default_kill_at(args.steps)
    if not 1 <= kill_at <= args.steps - 1:
        if args.steps < 2:
            raise UsageError(
                f"--steps {args.steps} leaves no update to kill at; "
                "the demo needs --steps 2 or more"
            )
        raise UsageError(
            f"--kill-at {kill_at} is outside 1..{args.steps - 1} "
            "(1 to --steps minus 1)"
        )
    return kill_at


def demo_folder(args: argparse.Namespace) -> Path:
    if args.output_dir is None:
        return Path(tempfile.mkdtemp(prefix="resume-lab-demo-"))
    output_dir = writable_folder(args.output_dir)
    foreign = sorted(
        p.name for p in output_dir.iterdir() if p.name not in DEMO_ENTRIES
    )
    if foreign:
        raise UsageError(
            f"output folder {output_dir} holds files the demo did not "
            f"write ({', '.join(foreign[:3])}); "
            "choose an empty or new --output-dir"
        )
    return output_dir


def cmd_demo(args: argparse.Namespace) -> int:
    kill_at = demo_kill_at(args)
    config = LabConfig(seed=args.seed, steps=args.steps, accum=args.accum)
    output_dir = demo_folder(args)
    if args.world_size > 1:
        return cmd_distributed_demo(
            DemoPlan(config, kill_at, args.world_size, output_dir, args.threads)
        )
    report = run_demo(config, kill_at, output_dir, quiet=args.quiet)
    write_json(output_dir / "report.json", report)
    print(format_report(report, output_dir))
    return EXIT_OK if demo_passed(report) else EXIT_REJECTED


def cmd_distributed_demo(plan: DemoPlan) -> int:
    """The demo as torchrun launches of `train`; a launch that fails or
    hangs is the demo's failure (exit 1), with its last lines shown."""
    try:
        report = run_distributed_demo(plan)
    except LaunchError as err:
        log(f"resume-lab demo: failed: {err}")
        return EXIT_REJECTED
    write_json(plan.output_dir / "report.json", report)
    print(format_distributed_report(report, plan.output_dir))
    return EXIT_OK if distributed_passed(report) else EXIT_REJECTED


def cmd_train(args: argparse.Namespace, *, owns_process: bool = False) -> int:
    """Arguments in, exit status out: the work is train_in_folder()'s."""
    options = TrainOptions(
        folder=args.output_dir,
        config=LabConfig(seed=args.seed, steps=args.steps, accum=args.accum),
        save_every=args.save_every,
        keep=args.keep,
        time_budget=args.time_budget,
        stop_after=args.stop_after,
        quiet=args.quiet,
        shards=args.shards,
        strategy=args.strategy,
        async_save=args.async_save,
        fixed_reduction=args.reduction == "fixed",
        restore_rng=not args.skip_rng_restore,
    )
    flag = PreemptionFlag()
    # From here on SIGTERM/SIGINT only set a flag. When this call is the
    # whole process, they are ignored after training until exit, so a late
    # signal cannot change the exit status.
    with flag.installed(restore=not owns_process):
        outcome = train_in_folder(options, extra_callbacks=[flag], log=log)
    if outcome.rank != 0:  # rank 0 speaks for the run
        return EXIT_PREEMPTED if outcome.preempted else EXIT_OK
    if outcome.preempted:
        log(
            f"[train] preempted ({outcome.reason}): "
            f"saved {outcome.folder / LAST}; rerun the same command to resume"
        )
        return EXIT_PREEMPTED
    print(
        f"finished at update {outcome.step} ({outcome.reason}); "
        f"wrote {outcome.folder / FINAL}, history.json, timing.json"
    )
    return EXIT_OK


def describe(saved: Saved) -> list[str]:
    """What a verified training checkpoint holds, one line per part; the
    store says what holds its tensors."""
    state = saved.state
    position, history = state[keys.DATA_POSITION], state[keys.HISTORY]
    return [
        f"  step {state[keys.STEP]}; "
        f"data position: epoch {position['epoch']}, "
        f"micro-batch {position['micro']}, "
        f"{position['examples_seen']:,} examples seen",
        *saved.store.describe(saved),
        f"  callbacks: {json.dumps(state[keys.CALLBACKS])}",
        f"  history: {history['records']} updates "
        f"(the first {history['bytes']:,} bytes of history.jsonl)",
        f"  config: {json.dumps(state[keys.CONFIG])}",
    ]


def describe_weights(state: Any) -> list[str]:
    """A single-file checkpoint (final.pt): a flat dict of tensors."""
    tensors = (
        [v for v in state.values() if isinstance(v, torch.Tensor)]
        if isinstance(state, dict)
        else []
    )
    values = sum(t.numel() for t in tensors)
    return [f"  a flat state_dict: {len(tensors)} tensors, {values:,} values"]


def cmd_verify(args: argparse.Namespace) -> int:
    if not (args.path.exists() or args.path.is_symlink()):
        raise UsageError(f"{args.path}: no such file or folder")
    checkpoint = locate(args.path)
    # every file's size and hash before anything is unpickled, then
    # weights_only=True
    if checkpoint.is_dir():
        saved = read_checkpoint(checkpoint)
        manifest, details = saved.manifest, describe(saved)
    else:
        state, manifest = load_checkpoint(checkpoint)
        details = describe_weights(state)
    files = manifest["files"]
    shown = checkpoint if checkpoint.is_file() else f"{checkpoint}/"
    print(
        f"{args.path}: OK, {shown}: {len(files)} "
        f"file{'s' if len(files) != 1 else ''}, "
        f"{sum(f['bytes'] for f in files.values()):,} bytes, "
        f"each matching its {manifest['hash']} hash"
    )
    versions = manifest.get("versions", {})
    print(
        f"  saved at update {manifest['step']} "
        f"by torch {versions.get('torch', '?')} "
        f"(torch threads: {manifest.get('threads', '?')}) "
        f"at {manifest.get('saved_at', '?')}"
    )
    for line in details:
        print(line)
    return EXIT_OK


def normalise_argv(argv: Sequence[str]) -> list[str]:
    """No subcommand means the demo: `resume-lab --seed 3` is
    `resume-lab demo --seed 3`."""
    argv = list(argv)
    if not argv or (
        argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version")
    ):
        return ["demo", *argv]
    return argv


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(
        normalise_argv(sys.argv[1:] if argv is None else argv)
    )
    if args.command in ("demo", "train"):
        torch.set_num_threads(args.threads)
    try:
        if args.command == "train":
            return cmd_train(args, owns_process=argv is None)
        return cmd_demo(args) if args.command == "demo" else cmd_verify(args)
    except (UsageError, RunFolderError, ConfigError) as err:
        log(f"resume-lab {args.command}: error: {err}")
        return EXIT_USAGE
    except ConfigMismatchError as err:
        log(
            f"resume-lab {args.command}: error: {err}; "
            "rerun with the options it was made with, "
            "or choose a new --output-dir"
        )
        return EXIT_USAGE
    except CheckpointError as err:
        log(
            f"resume-lab {args.command}: rejected: "
            f"{err}{newest_snapshot_hint(args)}"
        )
        return EXIT_REJECTED
    except SaveError as err:
        log(
            f"resume-lab {args.command}: error: {err}; "
            "free space or fix the folder, then rerun "
            "the same command to resume from the previous checkpoint"
        )
        return EXIT_SAVE_FAILED
    except KeyboardInterrupt:
        log(f"resume-lab {args.command}: interrupted")
        return EXIT_INTERRUPTED


def newest_snapshot_hint(args: argparse.Namespace) -> str:
    """After a rejected `last`, point at the newest kept checkpoint that still
    verifies."""
    folder = getattr(args, "output_dir", None)
    if args.command != "train" or folder is None:
        return ""
    for candidate in reversed(committed(Path(folder))):
        try:
            verify(candidate)
        except CheckpointError:
            continue
        return (
            f"; {candidate.name} verifies: to resume from it, "
            f"ln -sfn {candidate.name} {Path(folder) / LAST}"
        )
    return ""


def run() -> int:
    """main() as a command: output piped into `head` that stops reading is
    not an error worth a traceback."""
    try:
        return main()
    except BrokenPipeError:
        # the reader left; say nothing more (further writes would fail too)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
