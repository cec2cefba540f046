"""The demo at W processes: A, B and C as `train` runs under torchrun, plus
B1, a copy of B's stop resumed by one process.

Every run is a real `resume-lab train` command in fresh processes, so only
the files of a run folder carry state from a stop to its resume, and the
comparison is of the files a user would compare: final.pt, history.json
and history.jsonl, byte for byte.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from resume_lab.checkpoint import load_checkpoint, locate, verify
from resume_lab.config import LabConfig
from resume_lab.data import make_blobs
from resume_lab.evaluate import evaluate
from resume_lab.exit_codes import EXIT_PREEMPTED
from resume_lab.experiment import first_divergent_step
from resume_lab.history_log import HISTORY_LOG
from resume_lab.model import build_model
from resume_lab.outputs import FINAL, HISTORY, read_history
from resume_lab.run_folder import LAST
from resume_lab.versions import versions

RUNS = ("A", "B", "B1", "C")
RESUMED = ("B", "B1", "C")
COMPARED = (FINAL, HISTORY, HISTORY_LOG)
# torchrun's summary of a failed worker: "exitcode  : 75 (pid: 123)"
WORKER_EXIT = re.compile(r"exitcode\s*:\s*(-?\d+)")
# what rank 0 of a resumed `train` logs
RESUMED_AT = re.compile(r"\[train\] resumed from .* at update (\d+)")
TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR")
# Start-up (torch import, rendezvous) takes seconds and a micro-batch a few
# hundredths of one; many times that is a hang (a gloo collective whose
# peer died), which must fail the demo instead of blocking it.
START_SECONDS = 120.0
SECONDS_PER_MICRO_BATCH = 0.5


class LaunchError(Exception):
    """A launch did not end as the demo expects (it failed, or overran and
    was killed); the message holds the command and its last output."""


@dataclass(frozen=True)
class Launch:
    argv: list[str]
    returncode: int
    output: str  # stdout and stderr, interleaved
    seconds: float


@dataclass(frozen=True)
class DemoPlan:
    config: LabConfig
    kill_at: int
    world_size: int
    output_dir: Path
    threads: int = 1


def lab_env() -> dict[str, str]:
    """The children import this very package (installed or not), run one
    OpenMP thread each, and never join a torchrun group this process may
    have been started in."""
    env = dict(os.environ)
    package_root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (package_root, env.get("PYTHONPATH")) if p
    )
    env["OMP_NUM_THREADS"] = "1"
    for name in (*TORCHRUN_VARIABLES, "MASTER_PORT"):
        env.pop(name, None)
    return env


def train_argv(
    plan: DemoPlan, world_size: int, name: str, *extra: str
) -> list[str]:
    """`resume-lab train` into DIR/name: under torchrun for W > 1, a plain
    process for W = 1 (the same code, a world of one)."""
    launcher = [sys.executable]
    if world_size > 1:
        launcher += ["-m", "torch.distributed.run", "--standalone"]
        launcher += ["--nproc-per-node", str(world_size)]
    config = plan.config
    return [
        *launcher,
        *("-m", "resume_lab", "train"),
        *("--output-dir", str(plan.output_dir / name)),
        *("--seed", str(config.seed), "--steps", str(config.steps)),
        *("--accum", str(config.accum), "--threads", str(plan.threads)),
        "--quiet",
        *extra,
    ]


def descendants(pid: int) -> list[int]:
    """Every process below `pid`, read from /proc (Linux). torchrun starts
    each worker in a session of its own, so killing torchrun's process
    group alone would leave the workers running."""
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                for child in map(int, (task / "children").read_text().split()):
                    found += [child, *descendants(child)]
    return found


def kill_tree(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the launch's process group and every worker's group."""
    groups = {proc.pid}  # start_new_session: its pid is its group's id
    for pid in descendants(proc.pid):  # before torchrun dies: they move
        with contextlib.suppress(ProcessLookupError):
            groups.add(os.getpgid(pid))
    groups.discard(os.getpgrp())  # never the demo's own group
    for group in groups:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)
    proc.wait()


def launch(argv: list[str], timeout: float) -> Launch:
    """Run one command to its end in a new session; kill it and its workers
    if it overruns, or if the demo is interrupted (Ctrl-C reaches the
    terminal's foreground group, not a new session)."""
    started = time.perf_counter()
    # a file, not a pipe: reading the output never waits for a worker
    # that still holds the pipe open
    with tempfile.TemporaryFile() as output:
        proc = subprocess.Popen(
            argv,
            env=lab_env(),
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            returncode: int | None = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            returncode = None
            kill_tree(proc)
        except BaseException:
            kill_tree(proc)
            raise
        output.seek(0)
        text = output.read().decode("utf8", "replace")
    if returncode is None:
        raise LaunchError(
            f"timed out after {timeout:.0f} s and killed: "
            f"{shown(argv)}{tail(text)}"
        )
    return Launch(argv, returncode, text, time.perf_counter() - started)


def shown(argv: list[str]) -> str:
    return " ".join(Path(a).name if a == sys.executable else a for a in argv)


def tail(text: str, lines: int = 12) -> str:
    kept = text.strip().splitlines()[-lines:]
    return "".join(f"\n  | {line}" for line in kept)


def expect_success(run: Launch) -> None:
    if run.returncode != 0:
        raise LaunchError(
            f"exit {run.returncode} from {shown(run.argv)}{tail(run.output)}"
        )


def expect_stop(run: Launch, folder: Path, kill_at: int) -> None:
    """B's first launch: every rank exits 75 (so torchrun exits non-zero,
    as expected) after committing the checkpoint at update kill_at."""
    codes = sorted(set(WORKER_EXIT.findall(run.output)))
    saved = verify(folder / LAST)["step"] if (folder / LAST).exists() else None
    stopped = [str(EXIT_PREEMPTED)]
    if run.returncode == 0 or codes != stopped or saved != kill_at:
        raise LaunchError(
            f"expected every rank to exit {EXIT_PREEMPTED} after saving "
            f"update {kill_at}; got torchrun exit {run.returncode}, worker "
            f"exits {codes or 'none'}, last at update {saved}: "
            f"{shown(run.argv)}{tail(run.output)}"
        )


def differing(a: Path, b: Path) -> list[str]:
    """The compared files that are not byte-identical (empty: a match)."""
    return [n for n in COMPARED if (a / n).read_bytes() != (b / n).read_bytes()]


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
        "rank_files": sorted(n for n in files if n.endswith(".distcp")),
    }


def resumed_at(run: Launch) -> int | None:
    """The update rank 0 says the run resumed from; None if it started."""
    found = RESUMED_AT.search(run.output)
    return int(found.group(1)) if found else None


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

    def train(name: str, world_size: int, *extra: str) -> None:
        """One launch, checked before anything builds on it."""
        run = launch(train_argv(plan, world_size, name, *extra), timeout)
        launches[name].append(run)
        note = ""
        if "--stop-after" in extra:
            expect_stop(run, plan.output_dir / name, plan.kill_at)
            note = f" (as asked: every rank exited {EXIT_PREEMPTED})"
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
    report = compare(plan, launches)
    report["checkpoint"] = checkpoint
    report["seconds"] = round(time.perf_counter() - started, 3)
    return report


def compare(
    plan: DemoPlan, launches: dict[str, list[Launch]]
) -> dict[str, Any]:
    """Every resumed run against A: its files, its history, where it
    resumed; plus what a report needs to say how the runs were made."""
    out = plan.output_dir
    reference = read_history(out / "A")
    differs = {name: differing(out / "A", out / name) for name in RESUMED}
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
        "resumed_at": {n: resumed_at(launches[n][-1]) for n in RESUMED},
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
