"""Runs A, B and C of the demo, and the report that compares them."""

from __future__ import annotations

import gc
import time
import weakref
from pathlib import Path
from typing import Any

import torch

from resume_lab.build import build_trainer
from resume_lab.checkpoint import locate, verify
from resume_lab.compare import (
    checkpoint_bytes,
    curve,
    first_divergent_step,
    tensors_equal,
)
from resume_lab.config import LabConfig
from resume_lab.evaluate import evaluate
from resume_lab.loop import Trainer
from resume_lab.outputs import write_final
from resume_lab.progress import Progress
from resume_lab.resume import resume, save_training
from resume_lab.run_files import FINAL, LAST, STATE_FILE
from resume_lab.versions import versions


def run_uninterrupted(
    config: LabConfig, folder: Path, *, quiet: bool = True
) -> Trainer:
    """Run A: one process, start to finish."""
    folder.mkdir(parents=True, exist_ok=True)
    trainer = build_trainer(
        config,
        init_seed=config.seed,
        callbacks=[Progress("A", config.steps, quiet=quiet)],
    )
    trainer.fit(config.steps)
    write_final(trainer, folder)
    return trainer


# --8<-- [start:run_interrupted]
def run_interrupted(
    config: LabConfig,
    kill_at: int,
    folder: Path,
    *,
    restore_rng: bool = True,
    label: str = "B",
    quiet: bool = True,
) -> Trainer:
    """Run B (or C with restore_rng=False): killed at `kill_at`, rebuilt from
    the file, finished."""
    folder.mkdir(parents=True, exist_ok=True)
    progress = Progress(label, config.steps, quiet=quiet)
    first = build_trainer(config, init_seed=config.seed, callbacks=[progress])
    first.fit(kill_at)
    # a committed checkpoint directory, named by folder/last
    save_training(first, folder)

    # Delete every training object: from here on, only the files carry state.
    model_alive = weakref.ref(first.model)
    del first
    if model_alive() is not None:  # only a reference cycle could still hold it
        gc.collect()
    assert model_alive() is None, "a training object outlived the 'kill'"

    # A new process would have its own seed; resume() must make that irrelevant.
    init_seed = (config.seed + 1) % 2**32
    second = build_trainer(config, init_seed=init_seed, callbacks=[progress])
    verify(folder / LAST)  # every file's size and hash, nothing unpickled
    resume(second, folder / LAST, restore_rng_state=restore_rng)
    progress.line(
        f"killed at update {kill_at}; rebuilt with init seed {init_seed}, "
        "verified and loaded last, "
        f"{'restored' if restore_rng else 'did NOT restore'} the RNG state"
    )
    second.fit(config.steps)
    write_final(second, folder)
    return second


# --8<-- [end:run_interrupted]


def default_kill_at(steps: int) -> int:
    """The course's update 50, or half the run when the run is that short."""
    return 50 if steps > 50 else steps // 2


def run_demo(
    config: LabConfig, kill_at: int, output_dir: Path, *, quiet: bool = True
) -> dict[str, Any]:
    """Runs A, B, C into output_dir/{A,B,C}, writes nothing else; returns the
    report dict."""
    started = time.perf_counter()
    a = run_uninterrupted(config, output_dir / "A", quiet=quiet)
    b = run_interrupted(
        config,
        kill_at,
        output_dir / "B",
        restore_rng=True,
        label="B",
        quiet=quiet,
    )
    c = run_interrupted(
        config,
        kill_at,
        output_dir / "C",
        restore_rng=False,
        label="C",
        quiet=quiet,
    )
    final_metrics = evaluate(a.model, a.data.x_val, a.data.y_val)
    manifest = verify(output_dir / "B" / LAST)
    final_digests = {
        name: verify(output_dir / name / FINAL)["files"][FINAL]
        for name in "ABC"
    }
    return {
        "bitwise_equal": tensors_equal(
            a.model.state_dict(), b.model.state_dict()
        ),
        "optimizer_equal": tensors_equal(
            a.optimizer.state_dict(), b.optimizer.state_dict()
        ),
        "final_files_identical": final_digests["A"] == final_digests["B"],
        "curves_equal": curve(a.history) == curve(b.history),
        "histories_equal": first_divergent_step(a.history, b.history) is None,
        "negative_control_differs": not tensors_equal(
            a.model.state_dict(), c.model.state_dict()
        ),
        "first_divergent_step": first_divergent_step(a.history, c.history),
        "kill_at": kill_at,
        "steps_done": {"A": a.step, "B": b.step, "C": c.step},
        "stop_reason": {
            "A": a.stop_reason or "completed",
            "B": b.stop_reason or "completed",
            "C": c.stop_reason or "completed",
        },
        "val_accuracy": final_metrics["val_accuracy"],
        "val_loss": final_metrics["val_loss"],
        "checkpoint": {
            "path": f"B/{LAST}",
            "directory": locate(output_dir / "B" / LAST).name,
            "hash": manifest["hash"],
            "files": manifest["files"],
            "step": manifest["step"],
        },
        "checkpoint_bytes": checkpoint_bytes(output_dir / "B" / LAST),
        "config": config.to_dict(),
        "versions": versions(),
        "threads": torch.get_num_threads(),
        "seconds": round(time.perf_counter() - started, 3),
    }


def demo_passed(report: dict[str, Any]) -> bool:
    return bool(
        report["bitwise_equal"]
        and report["curves_equal"]
        and report["negative_control_differs"]
    )


def format_report(report: dict[str, Any], output_dir: Path) -> str:
    """The report as a reader would like to see it."""
    cfg, sizes, ckpt = (
        report["config"],
        report["checkpoint_bytes"],
        report["checkpoint"],
    )
    yes = {True: "yes", False: "NO"}
    diverged = report["first_divergent_step"]
    a_end = (
        f"{report['stop_reason']['A']} at update {report['steps_done']['A']}"
    )
    lines = [
        f"resume lab: seed {cfg['seed']}, {cfg['steps']} updates, "
        f"kill at {report['kill_at']}, "
        f"accum {cfg['accum']} (torch {report['versions']['torch']}, "
        f"{report['threads']} thread{'s' if report['threads'] != 1 else ''}, "
        f"{report['seconds']:.1f} s)",
        "  A  uninterrupted               "
        f"val_accuracy {report['val_accuracy']:.4f} ({a_end})",
        "  B  killed, rebuilt, resumed    "
        f"bitwise equal to A: {yes[report['bitwise_equal']]}"
        f" (optimizer state {yes[report['optimizer_equal']]}, "
        f"curves {yes[report['curves_equal']]}, "
        f"final.pt bytes {yes[report['final_files_identical']]})",
        f"  C  B without the RNG restore   differs from A: "
        f"{yes[report['negative_control_differs']]}"
        + (f", first at update {diverged}" if diverged is not None else ""),
        f"  checkpoint B/last -> {ckpt['directory']}/ "
        f"(update {ckpt['step']}): {sizes['total']:,} bytes, "
        f"{ckpt['hash']} of state.pt "
        f"{ckpt['files'][STATE_FILE]['digest'][:16]}...",
        f"    parameters {sizes['parameters']:,} + optimizer moments "
        f"{sizes['optimizer_moments']:,} + RNG torch {sizes['rng_torch']:,} / "
        f"numpy {sizes['rng_numpy']:,} / python {sizes['rng_python']:,}",
        f"    + rest {sizes['rest']:,} "
        "(step counts, config, pickle, ZIP headers, manifest)",
        f"  wrote {output_dir / 'report.json'} and A/, B/, C/",
        "PASS: A == B bitwise, C differs"
        if demo_passed(report)
        else "FAIL: see report.json",
    ]
    return "\n".join(lines)
