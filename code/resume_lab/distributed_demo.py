"""The demo at W processes: A, B and C as `train` runs under torchrun, plus
B1, a copy of B's stop resumed by one process.

Every run is a real `resume-lab train` command in fresh processes, so only
the files of a run folder carry state from a stop to its resume, and the
comparison is of the files a user would compare: final.pt, history.json
and history.jsonl, byte for byte.
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from resume_lab.checkpoint import load_checkpoint, locate, verify
from resume_lab.compare import COMPARED, differing_files, first_divergent_step
from resume_lab.config import LabConfig
from resume_lab.data import make_blobs
from resume_lab.evaluate import evaluate
from resume_lab.exit_codes import EXIT_PREEMPTED
from resume_lab.launcher import (
    Launch,
    LaunchError,
    command,
    environment,
    launch,
    shown,
    tail,
)
from resume_lab.model import build_model
from resume_lab.outputs import read_history
from resume_lab.run_files import FINAL, LAST, SHARD_SUFFIX
from resume_lab.versions import versions

RUNS = ("A", "B", "B1", "C")
RESUMED = ("B", "B1", "C")
# Start-up (torch import, rendezvous) takes seconds and a micro-batch a few
# hundredths of one; many times that is a hang (a gloo collective whose
# peer died), which must fail the demo instead of blocking it.
START_SECONDS = 120.0
SECONDS_PER_MICRO_BATCH = 0.5


@dataclass(frozen=True)
class DemoPlan:
    config: LabConfig
    kill_at: int
    world_size: int
    output_dir: Path
    threads: int = 1


def train_argv(
    plan: DemoPlan, world_size: int, name: str, *extra: str
) -> list[str]:
    """`resume-lab train` into DIR/name: under torchrun for W > 1, a plain
    process for W = 1 (the same code, a world of one)."""
    config = plan.config
    return command(
        world_size,
        "resume_lab",
        [
            "train",
            *("--output-dir", str(plan.output_dir / name)),
            *("--seed", str(config.seed), "--steps", str(config.steps)),
            *("--accum", str(config.accum), "--threads", str(plan.threads)),
            "--quiet",
            *extra,
        ],
    )


def expect_success(run: Launch) -> None:
    if run.returncode != 0:
        raise LaunchError(
            f"exit {run.returncode} from {shown(run.argv)}{tail(run.output)}"
        )


def expect_stop(run: Launch, folder: Path, kill_at: int) -> None:
    """B's first launch, as its files show it: stopped (exit 75, so torchrun
    exits non-zero, as expected) with `last` verified at update kill_at and
    no final.pt."""
    saved = saved_step(folder)
    if run.returncode == 0 or saved != kill_at or (folder / FINAL).exists():
        raise LaunchError(
            f"expected a stop ({EXIT_PREEMPTED}) with last at update "
            f"{kill_at} and no {FINAL}; got exit {run.returncode}, last at "
            f"update {saved}: {shown(run.argv)}{tail(run.output)}"
        )


def saved_step(folder: Path) -> int | None:
    """The update `last` names, verified; None if there is no `last`."""
    last = folder / LAST
    return verify(last)["step"] if last.is_symlink() else None


def final_metrics(folder: Path, config: LabConfig) -> dict[str, float]:
    """Validation metrics of A's final.pt, verified before it is loaded."""
    weights, _ = load_checkpoint(folder / FINAL)
    model = build_model(config.dropout)
    model.load_state_dict(weights)
    data = make_blobs(config.data_seed)
    return evaluate(model, data.x_val, data.y_val)


def checkpoint_summary(folder: Path) -> dict[str, Any]:
    """B's stop as it is on disk: which directory, its files and sizes."""
    manifest = verify(folder / LAST)
    files = manifest["files"]
    return {
        "directory": locate(folder / LAST).name,
        "step": manifest["step"],
        "hash": manifest["hash"],
        "files": len(files),
        "bytes": sum(f["bytes"] for f in files.values()),
        "rank_files": sorted(n for n in files if n.endswith(SHARD_SUFFIX)),
    }


def run_distributed_demo(
    plan: DemoPlan, *, log: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """A; B stopped at kill_at, copied to B1 and C, resumed; B1 resumed at
    W=1; C resumed at W without the shard RNG restore. Returns the report;
    raises LaunchError if a launch does not end as expected."""
    started = time.perf_counter()
    say = log or (lambda line: print(line, file=sys.stderr, flush=True))
    timeout = (
        START_SECONDS
        + SECONDS_PER_MICRO_BATCH * plan.config.steps * plan.config.accum
    )
    for name in RUNS:  # an earlier demo's run would be resumed, not rerun
        shutil.rmtree(plan.output_dir / name, ignore_errors=True)
    launches: dict[str, list[Launch]] = {name: [] for name in RUNS}
    # where each resumed run starts: its folder's `last`, read at its launch
    resumed_at: dict[str, int | None] = {}

    def train(name: str, world_size: int, *extra: str) -> None:
        """One launch, checked before anything builds on it."""
        folder = plan.output_dir / name
        if "--stop-after" not in extra and name in RESUMED:
            resumed_at[name] = saved_step(folder)
        argv = train_argv(plan, world_size, name, *extra)
        run = launch(argv, timeout=timeout, env=environment())
        launches[name].append(run)
        note = ""
        if "--stop-after" in extra:
            expect_stop(run, plan.output_dir / name, plan.kill_at)
            note = f" (as asked: stopped, last at update {plan.kill_at})"
        else:
            expect_success(run)
        how = f"torchrun W={world_size}" if world_size > 1 else "one process"
        say(
            f"[demo] {name:<2} {how}, train {' '.join(extra) or 'to the end'}"
            f": exit {run.returncode}{note}, {run.seconds:.1f} s"
        )

    world, b_folder = plan.world_size, plan.output_dir / "B"
    train("A", world)
    train("B", world, "--stop-after", str(plan.kill_at))
    for name in ("B1", "C"):  # B's folder as the stop left it, links kept
        shutil.copytree(b_folder, plan.output_dir / name, symlinks=True)
    checkpoint = checkpoint_summary(b_folder)
    train("B", world)
    train("B1", 1)
    train("C", world, "--skip-rng-restore")
    report = compare(plan, launches, resumed_at)
    report["checkpoint"] = checkpoint
    report["seconds"] = round(time.perf_counter() - started, 3)
    return report


def compare(
    plan: DemoPlan,
    launches: dict[str, list[Launch]],
    resumed_at: dict[str, int | None],
) -> dict[str, Any]:
    """Every resumed run against A, from the runs' files: which differ byte
    for byte, the first update whose record differs, where each resumed;
    plus what a report needs to say how the runs were made."""
    out = plan.output_dir
    reference = read_history(out / "A")
    differs = {n: differing_files(out / "A", out / n) for n in RESUMED}
    return {
        "world_size": plan.world_size,
        "shards": plan.world_size,
        "kill_at": plan.kill_at,
        "bitwise_equal": not differs["B"],
        "world_one_equal": not differs["B1"],
        "negative_control_differs": bool(differs["C"]),
        "differing_files": differs,
        "first_divergent_step": {
            name: first_divergent_step(reference, read_history(out / name))
            for name in RESUMED
        },
        "resumed_at": resumed_at,
        "updates": {name: len(read_history(out / name)) for name in RUNS},
        **final_metrics(out / "A", plan.config),
        "launches": [
            {
                "run": name,
                "argv": run.argv,
                "exit": run.returncode,
                "seconds": round(run.seconds, 3),
            }
            for name in RUNS
            for run in launches[name]
        ],
        "config": plan.config.to_dict(),
        "versions": versions(),
        "threads": plan.threads,
    }


def distributed_passed(report: dict[str, Any]) -> bool:
    """B == A and B1 == A byte for byte, C differs, and all three really
    resumed from the stop (a run that started afresh proves nothing)."""
    resumed = report["resumed_at"].values()
    return bool(
        report["bitwise_equal"]
        and report["world_one_equal"]
        and report["negative_control_differs"]
        and all(step == report["kill_at"] for step in resumed)
    )


def format_distributed_report(report: dict[str, Any], output_dir: Path) -> str:
    """The report as a reader would like to see it (format_report's style)."""
    cfg, ckpt, world = (
        report["config"],
        report["checkpoint"],
        report["world_size"],
    )
    yes = {True: "yes", False: "NO"}

    def files(name: str) -> str:
        diff = report["differing_files"][name]
        return ", ".join(f"{n} {yes[n not in diff]}" for n in COMPARED)

    def resumed(name: str) -> str:
        step = report["resumed_at"][name]
        return f"resumed at update {step}" if step else "did NOT resume"

    def seconds(name: str) -> str:
        runs = [r for r in report["launches"] if r["run"] == name]
        return " + ".join(f"{r['seconds']:.1f}" for r in runs) + " s"

    diverged = report["first_divergent_step"]["C"]
    threads = report["threads"]
    return "\n".join(
        [
            f"resume lab at world size {world}: seed {cfg['seed']}, "
            f"{cfg['steps']} updates, kill at {report['kill_at']}, "
            f"accum {cfg['accum']}, {report['shards']} logical shards "
            f"(torch {report['versions']['torch']}, {threads} "
            f"thread{'s' if threads != 1 else ''} per process, "
            f"{report['seconds']:.1f} s)",
            f"  A   torchrun W={world}, uninterrupted      "
            f"val_accuracy {report['val_accuracy']:.4f} "
            f"({report['updates']['A']} updates)",
            f"  B   torchrun W={world}, stopped, {resumed('B')}: "
            f"byte-identical to A: {yes[report['bitwise_equal']]} "
            f"({files('B')})",
            f"  B1  B's stop, one process, {resumed('B1')}: "
            f"byte-identical to A: {yes[report['world_one_equal']]} "
            f"({files('B1')})",
            f"  C   B's stop at W={world} without the shard RNG restore, "
            f"{resumed('C')}: differs from A: "
            f"{yes[report['negative_control_differs']]}"
            + (f", first at update {diverged}" if diverged is not None else ""),
            f"  checkpoint B/last -> {ckpt['directory']}/ (update "
            f"{ckpt['step']}): {ckpt['files']} files, {ckpt['bytes']:,} bytes, "
            f"each matching its {ckpt['hash']} hash; one piece per rank: "
            f"{', '.join(ckpt['rank_files'])}",
            "  launches: " + "; ".join(f"{n} {seconds(n)}" for n in RUNS),
            f"  wrote {output_dir / 'report.json'} and "
            f"{', '.join(f'{n}/' for n in RUNS)}",
            f"PASS: A == B (W={world}) == B1 (W=1) byte for byte, C differs"
            if distributed_passed(report)
            else "FAIL: see report.json",
        ]
    )
