"""The command line's words: subcommands, options, their checks, and the help
text with examples and exit codes."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import NoReturn

import torch

from resume_lab.exit_codes import EXIT_USAGE
from resume_lab.versions import LAB_VERSION

EPILOG = """\
examples:
  python -m resume_lab                      the demo with its defaults: runs A, B, C and a report
  python -m resume_lab demo --seed 3 --steps 200 --kill-at 77 --accum 3 --output-dir /tmp/lab
  python -m resume_lab demo --world-size 2  the same under torchrun: 2 processes, 2 logical shards
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


# The distributed demo runs every rank on this machine, one process each,
# and splits each 32-example micro-batch over L = W shards: at 8 each shard
# still sees 4 examples, and beyond 8 processes a workstation (let alone a
# 2-core CI runner) only waits longer for the same bitwise result.
MAX_DEMO_WORLD_SIZE = 8


def demo_world_size(text: str) -> int:
    value = whole_number(text)
    if not 1 <= value <= MAX_DEMO_WORLD_SIZE:
        raise argparse.ArgumentTypeError(
            f"must be in 1..{MAX_DEMO_WORLD_SIZE} (one process per rank on "
            f"this machine), got {value}"
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
        version=f"resume-lab {LAB_VERSION} (torch {torch.__version__})",
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
    demo.add_argument(
        "--world-size",
        metavar="W",
        type=demo_world_size,
        default=1,
        help="W >= 2: run A, B and C under torchrun with W processes and W "
        "logical shards, and resume a copy of B's stop in one process (B1); "
        f"1..{MAX_DEMO_WORLD_SIZE} (default 1: all in this process)",
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
    distributed = train.add_argument_group(
        "distributed (under torchrun --standalone --nproc-per-node W)"
    )
    distributed.add_argument(
        "--shards",
        metavar="L",
        type=positive_int,
        default=None,
        help="logical shards: data order and dropout belong to them, not to "
        "ranks (default: the world size at the first start; a resume takes "
        "the checkpoint's). W must divide L",
    )
    distributed.add_argument(
        "--strategy",
        choices=("ddp", "fsdp"),
        default="ddp",
        help="DistributedDataParallel or FSDP2 fully_shard (default ddp); "
        "a checkpoint resumes under either",
    )
    distributed.add_argument(
        "--async-save",
        action="store_true",
        help="write checkpoints in the background (dcp.async_save); "
        "committed once written",
    )
    distributed.add_argument(
        "--reduction",
        choices=("fixed", "engine"),
        default="fixed",
        help="fixed: shard-ordered sum, bitwise at any world size (default); "
        "engine: DDP's own all-reduce, the negative control",
    )
    # the distributed demo's negative control (C): a sharded resume that
    # keeps fresh dropout generators; hidden, as nobody wants it otherwise
    distributed.add_argument(
        "--skip-rng-restore", action="store_true", help=argparse.SUPPRESS
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
