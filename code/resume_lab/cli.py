"""Command line: `python -m resume_lab [demo|train|verify]` (also installed as
`resume-lab`).

The contract other tools rely on:

- demo (the default) writes DIR/{A,B,C}/final.pt (a flat dict of tensors),
  history.json (one record per update: step, loss, grad_norm, lr,
  examples_seen, val_loss, val_accuracy), timing.json (step, step_time),
  DIR/B/last (the pointer to B's checkpoint at the kill point), and
  DIR/report.json.
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
- Exit codes: see EXIT_* below and `--help`.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

import torch

from resume_lab import __version__
from resume_lab import state_keys as keys
from resume_lab.atomic import SaveError
from resume_lab.build import build_trainer
from resume_lab.callbacks import Checkpoint, StopAfter, TimeBudget
from resume_lab.checkpoint import (
    CheckpointError,
    load_checkpoint,
    locate,
    verify,
)
from resume_lab.config import ConfigError, LabConfig
from resume_lab.experiment import (
    default_kill_at,
    demo_passed,
    format_report,
    run_demo,
)
from resume_lab.loop import PREEMPTED
from resume_lab.outputs import FINAL, write_final, write_json
from resume_lab.progress import Progress
from resume_lab.resume import ConfigMismatchError, resume
from resume_lab.run_folder import LAST, committed
from resume_lab.signals import PreemptionFlag

# --8<-- [start:exit_codes]
EXIT_OK = 0
# a checkpoint failed verification, or the demo's A == B contract failed
EXIT_REJECTED = 1
# bad option value, unwritable output folder, another configuration's checkpoint
EXIT_USAGE = 2
# EX_IOERR: a checkpoint could not be written (disk full?); `last` intact
EXIT_SAVE_FAILED = 74
# EX_TEMPFAIL: stopped early on purpose, `last` saved; rerun the same command
EXIT_PREEMPTED = 75
EXIT_INTERRUPTED = 130  # Ctrl-C outside training (the demo, start-up)
# --8<-- [end:exit_codes]

SUBCOMMANDS = ("demo", "train", "verify")
DEMO_ENTRIES = {"A", "B", "C", "report.json"}

EPILOG = """\
examples:
  python -m resume_lab                      the demo with its defaults: runs A, B, C and a report
  python -m resume_lab demo --seed 3 --steps 200 --kill-at 77 --accum 3 --output-dir /tmp/lab
  python -m resume_lab train --output-dir runs/a --steps 600 --save-every 50
  python -m resume_lab train --output-dir runs/a --steps 600 --stop-after 100
                                            stops (exit 75) after 100 updates; run the same
                                            command again to resume where it stopped
  python -m resume_lab verify runs/a         the checkpoint runs/a/last names

exit codes:
  0    done (demo: A == B bitwise and C differs; verify: the checkpoint verifies)
  1    a checkpoint was rejected (damaged, truncated, manifest missing or not matching),
       or the demo's contract failed
  2    usage error: a bad option value, an unwritable output folder, a checkpoint made with
       another configuration
  74   a checkpoint could not be written (a full disk, say): the previous one is intact;
       free space and rerun the same command
  75   preempted (SIGTERM, SIGINT, --time-budget or --stop-after): DIR/last is saved;
       rerun the same command to resume
  130  interrupted by Ctrl-C outside training
"""


class UsageError(Exception):
    """A problem with the command line or its paths; main() prints it on one
    line, exit 2."""


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (no usage dump) and exit
    status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see --help)\n")


def whole_number(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a whole number, got {text!r}"
        ) from None


def positive_int(text: str) -> int:
    value = whole_number(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be positive, got {value}")
    return value


def seed_int(text: str) -> int:
    value = whole_number(text)
    if not 0 <= value < 2**32:
        raise argparse.ArgumentTypeError(
            f"must be in 0..4294967295, got {value}"
        )
    return value


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number of seconds, got {text!r}"
        ) from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(
            f"must be a positive, finite number of seconds, got {text}"
        )
    return value


def build_parser() -> OneLineParser:
    parser = OneLineParser(
        prog="resume-lab",
        description=(
            "Train a small MLP, interrupt it, resume it, "
            "and prove the resume exact."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"resume-lab {__version__} (torch {torch.__version__})",
    )
    commands = parser.add_subparsers(
        dest="command", metavar="{demo,train,verify}"
    )

    def common(sub: argparse.ArgumentParser) -> None:
        sub.add_argument(
            "--seed",
            metavar="S",
            type=seed_int,
            default=0,
            help="init, dropout and data-order seed (default 0)",
        )
        sub.add_argument(
            "--steps",
            metavar="N",
            type=positive_int,
            default=120,
            help="updates to train for (default 120)",
        )
        sub.add_argument(
            "--accum",
            metavar="K",
            type=positive_int,
            default=2,
            help="micro-batches of 32 per update (default 2)",
        )
        sub.add_argument(
            "--threads",
            metavar="N",
            type=positive_int,
            default=1,
            help="torch CPU threads (default 1: fastest for this tiny model; "
            "bitwise equality needs the same count on both sides of a resume)",
        )
        sub.add_argument(
            "--quiet",
            action="store_true",
            help="no progress bar; plain log lines only",
        )

    demo = commands.add_parser(
        "demo",
        help="runs A, B (killed and resumed) and C (B without RNG restore); "
        "the default",
        description=(
            "Run A uninterrupted, "
            "B killed at --kill-at and resumed from disk,\n"
            "C = B without the RNG restore; "
            "write DIR/{A,B,C}/ and DIR/report.json\n"
            "and print the report."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    common(demo)
    demo.add_argument(
        "--kill-at",
        metavar="U",
        type=int,
        default=None,
        help="update at which B and C are killed, in 1..steps-1 "
        "(default 50, or steps // 2 when steps <= 50)",
    )
    demo.add_argument(
        "--output-dir",
        metavar="DIR",
        type=Path,
        default=None,
        help="where to write (default: a new temporary folder); "
        "a folder holding anything but an earlier demo's files is refused",
    )

    train = commands.add_parser(
        "train",
        help="train with checkpoints; resumes from DIR/last if it exists",
        description=(
            "Train toward --steps, "
            "committing DIR/step-NNNNNN/ every --save-every updates,\n"
            "when the time budget runs out, "
            "and on SIGTERM/SIGINT (then exit 75).\n"
            "Resumes from DIR/last if it exists. "
            "A finished run writes DIR/final.pt,\n"
            "DIR/history.json and DIR/timing.json."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    train.add_argument(
        "--output-dir",
        metavar="DIR",
        type=Path,
        required=True,
        help="checkpoints and results (required)",
    )
    common(train)
    train.add_argument(
        "--save-every",
        metavar="U",
        type=positive_int,
        default=20,
        help="updates between checkpoints (default 20)",
    )
    train.add_argument(
        "--keep",
        metavar="N",
        type=positive_int,
        default=3,
        help="newest step-NNNNNN checkpoints to keep, besides the ones "
        "last and best name (default 3)",
    )
    train.add_argument(
        "--time-budget",
        metavar="SECONDS",
        type=positive_seconds,
        default=None,
        help="save and exit 75 before this many seconds pass",
    )
    train.add_argument(
        "--stop-after",
        metavar="U",
        type=positive_int,
        default=None,
        help="simulate preemption: save and exit 75 after this many updates",
    )

    check = commands.add_parser(
        "verify",
        help="check a checkpoint against its manifest and show what it holds",
        description=(
            "Check every file of a checkpoint against its manifest "
            "(sizes and hashes,\n"
            "no file missing, none added) before unpickling anything, "
            "then load it\nwith weights_only=True and show what it holds. "
            "PATH is a run folder\n(its last), a pointer, a checkpoint "
            "directory or final.pt. Exit 0 only if\nit verifies."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    check.add_argument(
        "path",
        metavar="PATH",
        type=Path,
        help="a checkpoint written by this lab, e.g. DIR, DIR/last or "
        "DIR/step-000040",
    )
    return parser


def writable_folder(path: Path) -> Path:
    """Create `path` if needed and prove it is writable, before any work is
    done."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as err:
        reason = err.strerror or str(err)
        raise UsageError(
            f"cannot write to output folder {path}: {reason}; "
            "choose another --output-dir"
        ) from None
    return path


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def cmd_demo(args: argparse.Namespace) -> int:
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
    config = LabConfig(seed=args.seed, steps=args.steps, accum=args.accum)
    if args.output_dir is None:
        output_dir = Path(tempfile.mkdtemp(prefix="resume-lab-demo-"))
    else:
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
    report = run_demo(config, kill_at, output_dir, quiet=args.quiet)
    write_json(output_dir / "report.json", report)
    print(format_report(report, output_dir))
    return EXIT_OK if demo_passed(report) else EXIT_REJECTED


def cmd_train(args: argparse.Namespace, *, owns_process: bool = False) -> int:
    config = LabConfig(seed=args.seed, steps=args.steps, accum=args.accum)
    folder = writable_folder(args.output_dir)
    last = folder / LAST
    resuming = last.is_symlink() or last.exists()
    if not resuming and (folder / FINAL).exists():
        raise UsageError(
            f"{folder / FINAL} exists but {last} does not; "
            "choose a new --output-dir"
        )
    flag = PreemptionFlag()
    # From here on SIGTERM/SIGINT only set a flag. When this call is the
    # whole process, they are ignored after training until exit, so a late
    # signal cannot change the exit status.
    with flag.installed(restore=not owns_process):
        progress = Progress("train", config.steps, quiet=args.quiet)
        callbacks: list[Any] = [
            Checkpoint(
                folder, every=args.save_every, keep=args.keep, log=progress.line
            )
        ]
        if args.time_budget is not None:
            callbacks.append(TimeBudget(args.time_budget))
        if args.stop_after is not None:
            callbacks.append(StopAfter(args.stop_after))
        callbacks.append(progress)
        trainer = build_trainer(
            config, init_seed=config.seed, callbacks=callbacks, preemption=flag
        )
        if resuming:
            # verified, config checked, RNG last
            manifest = resume(trainer, last)
            log(
                f"[train] resumed from {last} -> {locate(last).name} "
                f"at update {trainer.step}"
            )
            if manifest.get("threads") != torch.get_num_threads():
                log(
                    "[train] warning: saved with "
                    f"{manifest.get('threads')} threads, running with "
                    f"{torch.get_num_threads()}; "
                    "results will agree to round-off, not bitwise"
                )
        reason = trainer.fit(config.steps)
        if reason in PREEMPTED:
            log(
                f"[train] preempted ({reason}): saved {last}; "
                "rerun the same command to resume"
            )
            return EXIT_PREEMPTED
        write_final(trainer, folder)
    print(
        f"finished at update {trainer.step} ({reason}); "
        f"wrote {folder / FINAL}, history.json, timing.json"
    )
    return EXIT_OK


def describe(state: Any) -> list[str]:
    """What a verified checkpoint holds, one line per part."""
    if not (isinstance(state, dict) and keys.MODEL in state):
        tensors = (
            [v for v in state.values() if isinstance(v, torch.Tensor)]
            if isinstance(state, dict)
            else []
        )
        values = sum(t.numel() for t in tensors)
        return [
            f"  a flat state_dict: {len(tensors)} tensors, {values:,} values"
        ]
    model = state[keys.MODEL]
    position = state[keys.DATA_POSITION]
    history = state[keys.HISTORY]
    return [
        f"  step {state[keys.STEP]}; "
        f"data position: epoch {position['epoch']}, "
        f"micro-batch {position['micro']}, "
        f"{position['examples_seen']:,} examples seen",
        f"  model: {len(model)} tensors, "
        f"{sum(t.numel() for t in model.values()):,} parameters",
        f"  optimizer: {len(state[keys.OPTIMIZER]['state'])} parameter states; "
        f"scheduler at {state[keys.SCHEDULER]['last_epoch']} updates",
        f"  rng: {', '.join(state[keys.RNG])}; "
        f"sampler seed {state[keys.SAMPLER]['seed']}",
        f"  callbacks: {json.dumps(state[keys.CALLBACKS])}",
        f"  history: {history['records']} updates "
        f"(the first {history['bytes']:,} bytes of history.jsonl)",
        f"  config: {json.dumps(state[keys.CONFIG])}",
    ]


def cmd_verify(args: argparse.Namespace) -> int:
    if not (args.path.exists() or args.path.is_symlink()):
        raise UsageError(f"{args.path}: no such file or folder")
    checkpoint = locate(args.path)
    manifest = verify(checkpoint)  # every file, nothing unpickled yet
    state, _ = load_checkpoint(checkpoint)
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
    for line in describe(state):
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
    except (UsageError, ConfigError) as err:
        print(f"resume-lab {args.command}: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except ConfigMismatchError as err:
        print(
            f"resume-lab {args.command}: error: {err}; "
            "rerun with the options it was made with, "
            "or choose a new --output-dir",
            file=sys.stderr,
        )
        return EXIT_USAGE
    except CheckpointError as err:
        print(
            f"resume-lab {args.command}: rejected: "
            f"{err}{newest_snapshot_hint(args)}",
            file=sys.stderr,
        )
        return EXIT_REJECTED
    except SaveError as err:
        print(
            f"resume-lab {args.command}: error: {err}; "
            "free space or fix the folder, then rerun "
            "the same command to resume from the previous checkpoint",
            file=sys.stderr,
        )
        return EXIT_SAVE_FAILED
    except KeyboardInterrupt:
        print(f"resume-lab {args.command}: interrupted", file=sys.stderr)
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
