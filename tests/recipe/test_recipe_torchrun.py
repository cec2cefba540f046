"""snippets/recipe_torchrun.py, launched by torchrun, stopped, killed and rerun.

The recipe for several processes (FSDP2, DCP, torch + the standard library) must end a stopped
or killed run with the weights of a run never stopped, bit for bit, at the same world size W;
refuse a folder made at another W in one line (exit 2) before any work; refuse a damaged file
in one line naming it (exit 1); and stop every rank at one update boundary on SIGTERM (exit 75).

Quick tier (marked `heavy`: `make test-all` runs it, `make test` launches no torchrun), at
W = 2 on one module's runs: an uninterrupted run, and a run that gets SIGTERM on torchrun once
it prints update 7. torchrun does not report its workers' exit codes when it is signalled
itself (it exits 1 with its own traceback), so in that run each worker is a small wrapper
that starts the recipe, forwards the SIGTERM torchrun sends it, and writes down the recipe's
exit code. Copies of the stopped folder are then resumed (bitwise), resumed at W = 1
(refused) and resumed with a flipped byte in a shard (refused).

Slow tier: the same-W resume at W = 4, stopped twice (the reader's case; DDP's own bucketed
reduction is not bitwise there, FSDP2's reduce-scatter is); and a campaign of SIGKILLs at
random moments of a run that saves after every update, each to one rank (torchrun then tears
the rest down) or to the whole job (torchrun and every worker at once, as a scheduler or a lost
node does). After each kill, `latest` must verify at once (manifest, file set, SHA-256 of
every file) and a copy of the folder must resume to the end bitwise equal to an uninterrupted
run. RECIPE_CAMPAIGN_RECORD=1 writes the figures to docs/assets/bench/
recipe-torchrun-campaign.json (otherwise to the test's tmp_path); RECIPE_CAMPAIGN_KILLS sets
the number of kills (10).

Every launch runs under a timeout that kills torchrun and every worker (each worker is in a
session of its own: killing torchrun's process group does not reach it).
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from torchrun import lab_env

from bench import provenance
from resume_lab.compare import same_bytes
from resume_lab.launcher import descendants, kill_tree

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "snippets" / "recipe_torchrun.py"
TORCHRUN = Path(sys.executable).parent / "torchrun"
TIMEOUT = 180.0
EXIT_PREEMPTED = 75
# 24 updates of 4 micro-batches: an epoch ends at update 13 (its last window is short),
# evaluations at 10 and 20; a checkpoint every 5 updates and at each new best.
RUN = ("--steps", "24", "--save-every", "5")
STEP = re.compile(r"step-\d{6}")
CAMPAIGN_JSON = ROOT / "docs" / "assets" / "bench" / "recipe-torchrun-campaign.json"

# A worker that runs the recipe as its child, hands on the SIGTERM torchrun sends, and writes
# the recipe's exit code to EXITS/rank-R: torchrun reports no exit codes once it is signalled.
WRAPPER = """\
import os, signal, subprocess, sys
child = subprocess.Popen([sys.executable, *sys.argv[1:]])
signal.signal(signal.SIGTERM, lambda signum, frame: child.send_signal(signum))
code = child.wait()
with open(os.path.join(os.environ["EXITS"], "rank-" + os.environ["RANK"]), "w") as f:
    f.write(str(code))
sys.exit(code)
"""


@dataclass
class Launch:
    returncode: int
    stdout: str
    stderr: str


def torchrun(world: int, folder: Path, *extra: str, program: tuple[str, ...] = ()) -> list[str]:
    return [
        str(TORCHRUN),
        "--standalone",
        f"--nproc-per-node={world}",
        *(program or (str(RECIPE),)),
        "--output-dir",
        str(folder),
        *extra,
    ]


def launch(
    argv: list[str],
    *,
    env: dict[str, str] | None = None,
    until: str | None = None,
    then: Callable[[subprocess.Popen[bytes]], None] | None = None,
    timeout: float = TIMEOUT,
) -> Launch:
    """Run torchrun to its end under a timeout. With `until`, call `then(proc)` as soon as a
    line of the output starts with it. On overrun, kill torchrun and every worker, and fail.
    Output goes to files, not pipes: reading it never waits for a worker."""
    deadline = time.monotonic() + timeout
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            argv,
            env=env or lab_env(),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
        try:
            while until is not None and proc.poll() is None:
                out.seek(0)
                if any(line.startswith(until) for line in out.read().decode().splitlines()):
                    assert then is not None
                    then(proc)
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError
                time.sleep(0.02)
            proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except BaseException:
            kill_tree(proc)
            err.seek(0)
            raise AssertionError(
                f"timed out or interrupted: {argv}\n{err.read().decode(errors='replace')[-2000:]}"
            ) from None
        kill_tree(proc)  # nothing may outlive the launch (a no-op when all is done)
        out.seek(0)
        err.seek(0)
        stdout, stderr = (f.read().decode(errors="replace") for f in (out, err))
        return Launch(proc.returncode, stdout, stderr)


def sigterm(proc: subprocess.Popen[bytes]) -> None:
    os.kill(proc.pid, signal.SIGTERM)


def weights(folder: Path) -> dict[str, torch.Tensor]:
    return torch.load(folder / "final.pt", weights_only=True)


def bitwise_equal(a: Path, b: Path) -> bool:
    """The same keys, and every tensor the same dtype, shape and bytes."""
    x, y = weights(a), weights(b)
    return list(x) == list(y) and all(same_bytes(x[k], y[k]) for k in x)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def verifies(checkpoint: Path, world: int) -> bool:
    """The test's own check of a committed checkpoint: the manifest lists exactly the files
    beside it, DCP's .metadata and every rank's file among them, and every SHA-256 matches."""
    try:
        manifest = json.loads((checkpoint / "manifest.json").read_text())
        digests = manifest["sha256"]
    except (OSError, ValueError, KeyError):
        return False
    files = {p.name for p in checkpoint.iterdir()} - {"manifest.json"}
    needed = {".metadata", *(f"rank-{r}.pt" for r in range(world))}
    return (
        files == set(digests)
        and needed <= files
        and all(sha256(checkpoint / name) == digest for name, digest in digests.items())
        and manifest["options"]["nproc-per-node"] == world
    )


def latest(folder: Path) -> Path | None:
    pointer = folder / "latest"
    return folder / pointer.read_text().strip() if pointer.exists() else None


def exit_codes(stderr: str) -> list[int]:
    """The workers' exit codes in torchrun's failure report (one `exitcode : N` row each)."""
    return [int(code) for code in re.findall(r"^\s+exitcode\s*:\s*(-?\d+)", stderr, re.M)]


def snapshot(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


# --- the module's runs -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def whole(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("whole") / "run"
    done = launch(torchrun(2, folder, *RUN))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[-1] == f"finished at update 24: {folder / 'final.pt'}"
    return folder


@dataclass
class Stopped:
    folder: Path  # a copy of the run folder as the stop left it
    launch: Launch
    exits: dict[int, int]  # each rank's exit code, as its wrapper saw it


@pytest.fixture(scope="module")
def stopped(tmp_path_factory: pytest.TempPathFactory) -> Stopped:
    base = tmp_path_factory.mktemp("stopped")
    wrapper, exits = base / "worker.py", base / "exits"
    wrapper.write_text(WRAPPER)
    exits.mkdir()
    folder = base / "run"
    argv = torchrun(2, folder, *RUN, program=(str(wrapper), str(RECIPE)))
    run = launch(argv, env=lab_env() | {"EXITS": str(exits)}, until="update 7 ", then=sigterm)
    pristine = base / "pristine"
    shutil.copytree(folder, pristine)
    codes = {int(p.name.split("-")[1]): int(p.read_text()) for p in exits.iterdir()}
    return Stopped(pristine, run, codes)


def copy_of(stopped: Stopped, tmp_path: Path) -> Path:
    folder = tmp_path / "run"
    shutil.copytree(stopped.folder, folder)
    return folder


# --- quick tier ---------------------------------------------------------------------------------


def test_the_recipe_imports_only_torch_and_the_standard_library():
    text = RECIPE.read_text()
    imported = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            imported |= {alias.name.partition(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0 and node.module, "no relative imports"
            imported.add(node.module.partition(".")[0])
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            assert node.func.id != "__import__"
    assert "torch" in imported
    assert imported - {"torch"} <= sys.stdlib_module_names, imported
    assert not imported & {"importlib", "numpy"}
    assert len(text.splitlines()) <= 400


def test_the_recipe_shards_the_model_with_fsdp2_and_the_checkpoint_with_dcp():
    """recipe.md: the twin shards the model with FSDP2 and the checkpoint with DCP (read from
    the source; the heavy tests below run it, and find DCP's .metadata in every checkpoint)."""
    tree = ast.parse(RECIPE.read_text())
    called = {ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    assert {"fully_shard", "dcp.save", "dcp.load"} <= called


@pytest.mark.heavy
def test_sigterm_to_torchrun_stops_every_rank_at_one_update(stopped: Stopped):
    run = stopped.launch
    # torchrun, signalled itself, exits 1 with its own traceback and reports no exit codes
    assert run.returncode == 1, run.stderr[-3000:]
    assert "SignalException" in run.stderr
    # every rank exited 75, as its wrapper saw it
    assert stopped.exits == {0: EXIT_PREEMPTED, 1: EXIT_PREEMPTED}, run.stderr[-3000:]
    said = [line for line in run.stdout.splitlines() if line.startswith("stopped")]
    assert len(said) == 1, run.stdout  # rank 0 speaks for both
    update = int(re.fullmatch(r"stopped after update (\d+): run again to resume", said[0])[1])
    assert 7 <= update < 24
    # one committed checkpoint at that boundary, holding both ranks' pieces, and nothing half
    # written beside it
    folder = stopped.folder
    checkpoint = latest(folder)
    assert checkpoint is not None and checkpoint.name == f"step-{update:06d}"
    assert verifies(checkpoint, world=2)
    for rank in (0, 1):
        own = torch.load(checkpoint / f"rank-{rank}.pt", weights_only=True)
        assert own["progress"]["update"] == update
    assert not list(folder.glob("tmp-*"))
    assert not (folder / "final.pt").exists()


@pytest.mark.heavy
def test_the_rerun_finishes_bit_for_bit_like_the_run_never_stopped(
    whole: Path, stopped: Stopped, tmp_path: Path
):
    folder = copy_of(stopped, tmp_path)
    rerun = launch(torchrun(2, folder, *RUN))
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    stop = latest(stopped.folder)
    assert stop is not None
    # torch 2.8's gloo prints "[Gloo] Rank R is connected to N peer ranks. Expected number
    # of connected peer ranks is : N" from both ranks first, their writes sometimes
    # interleaved mid-line (so a fragment can start a line, even the bare "N" of one
    # that ended "is : N"), and blank lines
    gloo = ("[Gloo]", "is connected to", "connected peer ranks")
    lines = rerun.stdout.splitlines()
    ours = [
        line for line in lines if line.strip(" :0123456789") and not any(g in line for g in gloo)
    ]
    assert ours[0] == f"resumed from {folder / stop.name} at update {int(stop.name[5:])}"
    assert bitwise_equal(whole, folder)
    # and its final.pt has the one-process recipe's keys, whole (unsharded) tensors
    shapes = {k: tuple(v.shape) for k, v in weights(folder).items()}
    assert shapes == {
        "0.weight": (64, 16),
        "0.bias": (64,),
        "3.weight": (64, 64),
        "3.bias": (64,),
        "6.weight": (4, 64),
        "6.bias": (4,),
    }


@pytest.mark.heavy
def test_another_world_size_is_refused_in_one_line_before_any_work(
    stopped: Stopped, tmp_path: Path
):
    folder = copy_of(stopped, tmp_path)
    before = snapshot(folder)
    run = launch(torchrun(1, folder, *RUN))
    ours = [line for line in run.stderr.splitlines() if line.startswith("recipe_torchrun.py:")]
    assert ours == [
        f"recipe_torchrun.py: {folder} was made with --nproc-per-node 2, not 1: "
        "use the same or another --output-dir"
    ], run.stderr[-3000:]
    assert run.returncode == 1 and exit_codes(run.stderr) == [2]  # torchrun: 1; the rank: 2
    assert "update" not in run.stdout and "resumed" not in run.stdout
    assert snapshot(folder) == before  # nothing written, nothing removed


@pytest.mark.heavy
def test_a_flipped_byte_in_a_shard_is_refused_by_every_rank(stopped: Stopped, tmp_path: Path):
    """Each rank's exit code as its wrapper saw it: torchrun's own failure report lists the
    workers that failed before it stopped watching, which depends on the release (torch 2.8.0
    listed one of the two) and on timing."""
    folder = copy_of(stopped, tmp_path)
    checkpoint = latest(folder)
    assert checkpoint is not None
    shard = checkpoint / "__1_0.distcp"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0x01
    shard.write_bytes(data)
    wrapper, exits = tmp_path / "worker.py", tmp_path / "exits"
    wrapper.write_text(WRAPPER)
    exits.mkdir()
    argv = torchrun(2, folder, *RUN, program=(str(wrapper), str(RECIPE)))
    run = launch(argv, env=lab_env() | {"EXITS": str(exits)})
    ours = [line for line in run.stderr.splitlines() if line.startswith("recipe_torchrun.py:")]
    assert ours == [f"recipe_torchrun.py: refused {shard}: its SHA-256 is not the manifest's"], (
        run.stderr[-3000:]
    )
    assert run.returncode == 1, run.stderr[-3000:]
    codes = {int(p.name.split("-")[1]): int(p.read_text()) for p in exits.iterdir()}
    assert codes == {0: 1, 1: 1}, run.stderr[-3000:]
    assert "resumed" not in run.stdout and not (folder / "final.pt").exists()


# --- slow tier ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_resume_at_four_processes_is_bitwise(tmp_path: Path):
    """Stopped twice (before and after an evaluation), resumed at W = 4 each time."""
    reference = tmp_path / "whole"
    done = launch(torchrun(4, reference, *RUN))
    assert done.returncode == 0, done.stderr[-3000:]
    folder = tmp_path / "stopped"
    for line in ("update 6 ", "update 15 "):
        run = launch(torchrun(4, folder, *RUN), until=line, then=sigterm)
        assert run.returncode == 1, run.stderr[-3000:]
        assert "stopped after update" in run.stdout
        checkpoint = latest(folder)
        assert checkpoint is not None and verifies(checkpoint, world=4)
    assert int(checkpoint.name[5:]) > 10  # the second stop came after the evaluation at 10
    rerun = launch(torchrun(4, folder, *RUN))
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert bitwise_equal(reference, folder)


CAMPAIGN_STEPS = 60


def kill_at_random(
    proc: subprocess.Popen[bytes], kind: str, delay: float, rng: random.Random
) -> None:
    time.sleep(delay)
    if kind == "one rank":
        workers = descendants(proc.pid)
        os.kill(rng.choice(sorted(workers)), signal.SIGKILL)
        # torchrun tears the other rank down; launch() kills what is left
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=60)
    else:
        kill_tree(proc)  # torchrun and every worker


@pytest.mark.slow
def test_random_kills_leave_latest_verified_at_once_and_resume_bitwise(tmp_path: Path):
    kills = int(os.environ.get("RECIPE_CAMPAIGN_KILLS", "10"))
    rng = random.Random(f"recipe-torchrun-campaign-{kills}")
    started = provenance.start(tmp_path)
    options = ("--steps", str(CAMPAIGN_STEPS))
    reference = tmp_path / "whole"
    done = launch(torchrun(2, reference, *options, "--save-every", "1000"))
    assert done.returncode == 0, done.stderr[-3000:]

    folder = tmp_path / "killed"
    tally: Counter[str] = Counter()
    problems: list[str] = []
    for i in range(kills):
        checkpoint = latest(folder)
        at = int(checkpoint.name[5:]) if checkpoint else 0
        if at + 8 > CAMPAIGN_STEPS:  # too near the end to be killed on the way: start afresh
            shutil.rmtree(folder)
            at = 0
        target = max(2, at + rng.randint(1, 4))  # update 1 committed before the first kill
        kind = rng.choice(["one rank", "the whole job"])
        delay = rng.uniform(0.0, 0.2)  # an update and its save take about 0.15 s here

        def kill(proc: subprocess.Popen[bytes], kind: str = kind, delay: float = delay) -> None:
            kill_at_random(proc, kind, delay, rng)

        run = launch(
            torchrun(2, folder, *options, "--save-every", "1"), until=f"update {target} ", then=kill
        )
        if run.returncode == 0:
            problems.append(f"kill {i}: the run finished first")
            continue
        tally["kills"] += 1
        tally[kind] += 1
        tally["mid_save"] += bool(list(folder.glob("tmp-step-*")))
        checkpoint = latest(folder)
        if checkpoint is not None and verifies(checkpoint, world=2):
            tally["verified_at_once"] += 1
        else:
            problems.append(f"kill {i} ({kind}): latest {checkpoint} does not verify")
        best = folder / "best"  # from the first evaluation on; swapped before latest
        if best.exists() and not verifies(folder / best.read_text().strip(), world=2):
            problems.append(f"kill {i} ({kind}): best does not verify")
        copy = tmp_path / f"resumed-{i}"
        shutil.copytree(folder, copy)
        resumed = launch(torchrun(2, copy, *options, "--save-every", "1000"))
        if resumed.returncode == 0 and bitwise_equal(reference, copy):
            tally["resumed_bitwise"] += 1
        else:
            problems.append(f"kill {i} ({kind}): the resume differs: {resumed.stderr[-500:]}")
        shutil.rmtree(copy)

    figures = {
        "world_size": 2,
        "steps": CAMPAIGN_STEPS,
        "save_every": 1,
        "kills": tally["kills"],
        "compared": f"{same_bytes.__module__}.{same_bytes.__qualname__}",  # final.pt's tensors
        "victims": {"one_rank": tally["one rank"], "whole_job": tally["the whole job"]},
        "mid_save": tally["mid_save"],
        "verified_at_once": tally["verified_at_once"],
        "resumed_bitwise": tally["resumed_bitwise"],
        "problems": len(problems),
        "torch": torch.__version__,
        "date": provenance.now()[:10],
    }
    record = {
        "recipe_torchrun_kills": figures,
        "provenance": provenance.finish(started, test="tests/recipe/test_recipe_torchrun.py"),
    }
    target = (
        CAMPAIGN_JSON
        if os.environ.get("RECIPE_CAMPAIGN_RECORD") == "1"
        else tmp_path / (CAMPAIGN_JSON.name)
    )
    text = json.dumps(record, indent=2, sort_keys=True) + "\n"
    target.with_suffix(".tmp").write_text(text)
    target.with_suffix(".tmp").replace(target)
    assert problems == []
    assert tally["kills"] == tally["verified_at_once"] == tally["resumed_bitwise"] == kills >= 10
    assert tally["mid_save"] >= 1  # some kills really landed inside a save
