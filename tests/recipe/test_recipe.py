"""snippets/recipe.py, the one-process save-and-resume recipe, run, killed and rerun.

Every run here is checked against one uninterrupted run of the same options: `final.pt`
equal bit for bit (same keys, dtypes, shapes and bytes of every tensor). Runs are forked from this
process, which imported torch and the recipe once (tests/support/recipe_runs.py); what only a
new process shows (exit codes and stderr of `python snippets/recipe.py`, a real SIGKILL and the
same command run again to the end, a real SIGTERM and a real SIGINT) runs as one, seven in all.
The slow tier is a random-kill campaign.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import io
import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch
from recipe_runs import (
    PHASES,
    RECIPE,
    ROOT,
    HeldBack,
    Kill,
    Outcome,
    command,
    fork_run,
    load_recipe,
    warm_up,
)

from bench import provenance
from resume_lab.atomic import atomic_write_bytes
from resume_lab.compare import same_bytes

# A run that crosses epochs (1600 examples / 32 = 50 micro-batches, 16 windows of 3 and a
# short one of 2 in each) and stops early (5 evaluations without a better one), at update 120.
# Seeds the defaults do not use. --save-every is no option a folder must be resumed with.
OPTIONS = {"--steps": "150", "--accum": "3", "--seed": "5", "--save-every": "5"}
SAVE_EVERY = int(OPTIONS["--save-every"])
KILLED_AFTER = "after an update, before its save"

# Every run here is a real process (forked, or started), killed or run to its end: that is a
# `make test-all` check (heavy: page_fences/tiers.py); the file's own checks stay in `make test`.
FORKS_RUNS = pytest.mark.heavy


def argv(run: Path, **changes: str) -> list[str]:
    options = {**OPTIONS, **{f"--{k.replace('_', '-')}": v for k, v in changes.items()}}
    return ["--output-dir", str(run), *(w for pair in options.items() for w in pair)]


def verify(run: Path, pointer: str = "latest") -> dict[str, Any] | None:
    """Check what `pointer` names, as a resume would, without the recipe's code: the bytes
    of state.pt hash to the manifest's SHA-256 and load under weights_only=True. Returns the
    saved progress, or None when there is no pointer yet (killed before the first save)."""
    if not (run / pointer).exists():
        return None
    folder = run / (run / pointer).read_text().strip()
    manifest = json.loads((folder / "manifest.json").read_bytes())
    data = (folder / "state.pt").read_bytes()
    assert hashlib.sha256(data).hexdigest() == manifest["sha256"]["state.pt"], folder
    state = torch.load(io.BytesIO(data), weights_only=True)
    assert state["progress"]["update"] == manifest["update"], folder
    return state["progress"]


def weights(path: Path) -> dict[str, torch.Tensor]:
    return torch.load(path, weights_only=True)


def assert_bitwise(path: Path, expected: dict[str, torch.Tensor]) -> None:
    got = weights(path)
    assert list(got) == list(expected)
    for key, tensor in expected.items():
        assert same_bytes(got[key], tensor), key  # bytes: torch.equal takes -0.0 for 0.0


def listing(run: Path) -> list[str]:
    return sorted(p.name for p in run.iterdir())


def snapshot(run: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run)): p.read_bytes() for p in run.rglob("*") if p.is_file()}


def one_line(err: str) -> str:
    assert err.endswith("\n") and err.count("\n") == 1, repr(err)
    assert err.startswith("recipe.py: "), err
    return err


def stale(run: Path) -> list[str]:
    """Uncommitted checkpoint folders: a kill landed inside a save."""
    return sorted(p.name for p in run.glob("tmp-step-*"))


@dataclass
class Reference:
    run: Path
    lines: list[str]
    weights: dict[str, torch.Tensor]
    listing: list[str]
    progress: dict[str, Any]

    def allowed(self, lines: int) -> int:
        """The bytes of the first `lines` lines the run printed."""
        return sum(len(line) + 1 for line in self.lines[:lines])


@pytest.fixture(autouse=True)
def _this_process_untouched() -> Iterator[None]:
    """recipe.main runs only in children: this process keeps its signal handlers, its
    deterministic mode and its thread count (the root conftest would restore the last two)."""
    before = (
        signal.getsignal(signal.SIGTERM),
        signal.getsignal(signal.SIGINT),
        torch.are_deterministic_algorithms_enabled(),
        torch.get_num_threads(),
    )
    yield
    assert before == (
        signal.getsignal(signal.SIGTERM),
        signal.getsignal(signal.SIGINT),
        torch.are_deterministic_algorithms_enabled(),
        torch.get_num_threads(),
    )


@pytest.fixture(scope="module")
def recipe() -> ModuleType:
    module = load_recipe()
    warm_up(module)
    return module


@pytest.fixture(scope="module")
def reference(recipe: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> Reference:
    """The uninterrupted run, forked like the runs it is compared with."""
    run = tmp_path_factory.mktemp("reference") / "run"
    done = fork_run(recipe, argv(run), run.parent / "logs")
    assert done.code == 0, done.err
    progress = verify(run)
    assert progress is not None
    return Reference(run, done.lines, weights(run / "final.pt"), listing(run), progress)


def rerun(recipe: ModuleType, run: Path, logs: Path, reference: Reference) -> Outcome:
    """The same command again, to the end: it ends with the reference's weights."""
    done = fork_run(recipe, argv(run), logs)
    assert done.code == 0, done.err
    assert done.lines[-1] == f"finished at update {reference.progress['update']}: {run}/final.pt"
    assert_bitwise(run / "final.pt", reference.weights)
    return done


def killed(recipe: ModuleType, run: Path, logs: Path, kill: Kill) -> Outcome:
    """A run that SIGKILLs itself at `kill`; `latest` must verify at once."""
    done = fork_run(recipe, argv(run), logs, kill)
    assert done.code == -signal.SIGKILL, (done.code, done.err)
    assert done.hit is not None and done.hit["update"] >= kill.update, done.hit
    verify(run)
    verify(run, "best")
    return done


# --- the recipe as a file ------------------------------------------------------------------------


def test_the_recipe_is_torch_and_the_standard_library_in_350_lines_of_80_columns():
    source = RECIPE.read_text("utf8")
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {alias.name.partition(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0 and node.module, ast.unparse(node)
            imported.add(node.module.partition(".")[0])
    assert "torch" in imported
    assert imported - {"torch"} <= sys.stdlib_module_names, imported - sys.stdlib_module_names
    lines = source.splitlines()
    assert len(lines) <= 350
    assert max(len(line) for line in lines) <= 80


# --- an uninterrupted run, and runs killed from inside -------------------------------------------


@FORKS_RUNS
def test_the_reference_run_crosses_epochs_with_short_windows_and_stops_early(
    reference: Reference, recipe: ModuleType
):
    steps, accum = int(OPTIONS["--steps"]), int(OPTIONS["--accum"])
    micro_batches = 1600 // recipe.MICRO_BATCH  # 50: not a multiple of 3
    per_epoch = math.ceil(micro_batches / accum)  # 16 full windows and a short one
    assert micro_batches % accum
    losses = [float(line.split()[-1]) for line in reference.lines if "val-loss" in line]
    best = losses.index(min(losses))
    stop = (best + 1 + recipe.PATIENCE) * recipe.EVAL_EVERY  # 5 evaluations after the best
    assert len(losses) == best + 1 + recipe.PATIENCE and stop < steps
    progress = dict(reference.progress)
    assert abs(progress.pop("best_loss") - min(losses)) <= 5e-5  # printed to 4 places
    assert progress == {  # 17 updates an epoch: the data position counts short windows
        "update": stop,
        "epoch": stop // per_epoch,
        "micro": stop % per_epoch * accum,
        "bad_evals": recipe.PATIENCE,
        "stopped": True,
    }
    assert reference.progress["epoch"] >= 2
    assert reference.lines[-1] == f"finished at update {stop}: {reference.run}/final.pt"
    assert (reference.run / "best").read_text() == f"step-{(best + 1) * recipe.EVAL_EVERY:06d}"


@FORKS_RUNS
def test_killed_after_updates_resumes_bitwise(recipe, reference, tmp_path: Path):
    """SIGKILL right after an update's step, before its save: before the short window that
    ends epoch 0, mid-epoch, in the middle of the patience count, at the update that stops."""
    run, logs = tmp_path / "run", tmp_path / "logs"
    stop = reference.progress["update"]
    for update in (17, 36, 93, stop):
        killed(recipe, run, logs, Kill(KILLED_AFTER, update))
        progress = verify(run)
        assert progress is not None
        assert progress["update"] == (update - 1) // SAVE_EVERY * SAVE_EVERY
        assert not progress["stopped"] and stale(run) == []
    assert progress["bad_evals"] == recipe.PATIENCE - 1
    done = rerun(recipe, run, logs, reference)
    resumed = stop - SAVE_EVERY
    assert done.lines[0] == f"resumed from {run}/step-{resumed:06d} at update {resumed}"
    assert listing(run) == reference.listing


@FORKS_RUNS
def test_killed_inside_saves_resumes_bitwise(recipe, reference, tmp_path: Path):
    """SIGKILL at each step of a save, one save after another, rerunning the same command
    after each kill; `latest` verifies at once every time, and the folder ends as tidy as
    the uninterrupted run's."""
    run, logs = tmp_path / "run", tmp_path / "logs"
    cases = [  # (phase, at update, latest then, uncommitted folder left)
        ("after state.pt, before the manifest", 10, 5, ["tmp-step-000010"]),
        ("midway through the manifest", 20, 15, ["tmp-step-000020"]),
        ("after the manifest, before the rename", 25, 20, ["tmp-step-000025"]),
        ("after the rename, before the pointer swap", 30, 25, []),
        ("after tmp-latest, before its swap", 40, 35, []),
        ("after the best swap, before the latest swap", 50, 45, []),
        ("after the latest swap, before prune", 60, 60, []),
        ("inside prune, midway through a folder", 65, 65, []),
        ("after tmp-final.pt, before its rename", 0, 120, []),
    ]
    for phase, update, latest, uncommitted in cases:
        done = killed(recipe, run, logs, Kill(phase, update))
        assert done.hit is not None
        assert done.hit["update"] == max(update, latest), done.hit
        progress = verify(run)
        assert progress is not None and progress["update"] == latest, phase
        assert stale(run) == uncommitted, phase
    assert not (run / "final.pt").exists() and (run / "tmp-final.pt").exists()
    rerun(recipe, run, logs, reference)
    assert listing(run) == reference.listing


@FORKS_RUNS
def test_a_kill_between_the_pointer_swaps_keeps_the_best_checkpoint(recipe, reference, tmp_path):
    run, logs = tmp_path / "run", tmp_path / "logs"
    best = (reference.run / "best").read_text()
    update = int(best.removeprefix("step-"))  # the last new best: nothing later moves `best`
    killed(recipe, run, logs, Kill("after the best swap, before the latest swap", update))
    older = (run / "latest").read_text()
    assert older < best  # the kill left the older `latest`
    committed = {p.name: p.stat().st_ino for p in [run / best, *(run / best).iterdir()]}
    done = rerun(recipe, run, logs, reference)
    # The rerun resumes from it, redoes the updates up to the one `best` names, finds that
    # save's folder committed and keeps it (the same files), and swaps the pointers.
    assert done.lines[0] == f"resumed from {run}/{older} at update {int(older[5:])}"
    assert {p.name: p.stat().st_ino for p in [run / best, *(run / best).iterdir()]} == committed
    assert (run / "best").read_text() == best


@FORKS_RUNS
def test_save_every_may_change_from_one_run_of_a_folder_to_the_next(recipe, reference, tmp_path):
    """recipe.md: `--save-every` may change from one run of a folder to the next. Killed with
    --save-every 5, resumed with 7 and killed again, then resumed with 3 to the end: bitwise."""
    run, logs = tmp_path / "run", tmp_path / "logs"
    for every, update, latest in (("5", 17, 15), ("7", 40, 35)):
        done = fork_run(recipe, argv(run, save_every=every), logs, Kill(KILLED_AFTER, update))
        assert done.code == -signal.SIGKILL, done.err
        progress = verify(run)
        assert progress is not None and progress["update"] == latest
    done = fork_run(recipe, argv(run, save_every="3"), logs)
    assert done.code == 0, done.err
    assert done.lines[0] == f"resumed from {run}/step-000035 at update 35"
    assert_bitwise(run / "final.pt", reference.weights)


# recipe.md, "New state in the checkpoint": a counter of your own, added where the page says.
COUNTER_EDITS = [
    (  # the counter, beside the progress dict
        '                         "stopped": False}  # fmt: skip\n',
        '                         "stopped": False}  # fmt: skip\n    seen = {"windows": 0}\n',
    ),
    (  # into the dict that checkpoint() saves
        '                 "rng": capture_rng()}  # fmt: skip\n',
        '                 "rng": capture_rng(), "seen": seen}  # fmt: skip\n',
    ),
    (  # back out where train resumes
        '        s = state["progress"]\n',
        '        s, seen = state["progress"], state["seen"]\n',
    ),
    ('        s["update"] += 1\n', '        s["update"] += 1\n        seen["windows"] += 1\n'),
]


@FORKS_RUNS
def test_new_state_in_the_checkpoint_needs_only_the_edits_the_page_names(reference, tmp_path):
    """A counter added to `checkpoint()`'s dict and read back where `train` resumes, and no
    other edit (load_checkpoint asks for STATE_KEYS and accepts more): killed and rerun, the
    counter comes back, and the run still ends bitwise equal to the unedited recipe's."""
    source = RECIPE.read_text("utf8")
    for old, new in COUNTER_EDITS:
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    edited = tmp_path / "recipe_with_a_counter.py"
    edited.write_text(source, "utf8")
    spec = importlib.util.spec_from_file_location("recipe_with_a_counter", edited)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    run, logs = tmp_path / "run", tmp_path / "logs"
    done = fork_run(module, argv(run), logs, Kill(KILLED_AFTER, 17))
    assert done.code == -signal.SIGKILL, done.err
    done = fork_run(module, argv(run), logs)
    assert done.code == 0, done.err
    assert done.lines[0] == f"resumed from {run}/step-000015 at update 15"
    folder = run / (run / "latest").read_text()
    state = torch.load(folder / "state.pt", weights_only=True)
    assert state["seen"] == {"windows": state["progress"]["update"]}  # 15 came back
    assert_bitwise(run / "final.pt", reference.weights)


# --- refusals -----------------------------------------------------------------------------------


class Forgery:
    """A pickle that, unpickled without weights_only, runs code: it writes `marker`."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (exec, (f"open({str(self.marker)!r}, 'w').write('ran')",))


def forge(folder: Path, marker: Path, *, rehash: bool) -> None:
    """Replace state.pt with a forgery in torch.save's format; with `rehash`, the forger also
    writes its SHA-256 into the manifest, so only weights_only=True stands in the way."""
    buffer = io.BytesIO()
    torch.save({"model": Forgery(marker), "progress": {"update": 0}}, buffer)
    (folder / "state.pt").write_bytes(buffer.getvalue())
    if rehash:
        manifest = json.loads((folder / "manifest.json").read_bytes())
        manifest["sha256"]["state.pt"] = hashlib.sha256(buffer.getvalue()).hexdigest()
        (folder / "manifest.json").write_text(json.dumps(manifest))


@pytest.fixture(scope="module")
def saved(recipe: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run folder killed after update 12: `latest` names step-000010."""
    run = tmp_path_factory.mktemp("saved") / "run"
    killed(recipe, run, run.parent / "logs", Kill("after an update, before its save", 12))
    return run


def damaged(saved: Path, tmp_path: Path, how: str) -> tuple[Path, Path]:
    """A copy of `saved` with its latest checkpoint damaged `how`; the file it damaged."""
    run = tmp_path / "run"
    shutil.copytree(saved, run)
    folder = run / (run / "latest").read_text()
    state, manifest = folder / "state.pt", folder / "manifest.json"
    if how == "a flipped byte":
        data = bytearray(state.read_bytes())
        data[len(data) // 2] ^= 0x10
        state.write_bytes(bytes(data))
    elif how == "a truncated file":
        os.truncate(state, state.stat().st_size // 2)
    elif how == "a missing manifest":
        manifest.unlink()
        return run, manifest
    elif how.startswith("a forged pickle"):
        forge(folder, tmp_path / "marker", rehash="SHA-256" in how)
    return run, state


UNPICKLE = "not a training state that torch.load(weights_only=True) loads"


@FORKS_RUNS
@pytest.mark.parametrize(
    ("how", "why"),
    [
        ("a flipped byte", "its SHA-256 is not the manifest's"),
        ("a truncated file", "its SHA-256 is not the manifest's"),
        ("a missing manifest", "No such file or directory"),
        ("a forged pickle", "its SHA-256 is not the manifest's"),
        ("a forged pickle, its SHA-256 in the manifest", UNPICKLE),
    ],
)
def test_a_damaged_checkpoint_is_refused_in_one_line(recipe, saved, tmp_path, how, why):
    run, path = damaged(saved, tmp_path, how)
    unfinished = run / "tmp-step-000099"  # a save that never committed
    unfinished.mkdir()
    (unfinished / "state.pt").write_bytes(b"part of a save")
    before = snapshot(run)
    done = fork_run(recipe, argv(run), tmp_path / "logs")
    assert done.code == 1, done.err
    assert one_line(done.err) == f"recipe.py: refused {path}: {why}\n"
    assert done.out == "" and snapshot(run) == before
    marker = tmp_path / "marker"
    assert not marker.exists()
    if how.startswith("a forged pickle"):  # the forgery is live: unpickled, it runs
        job = lambda: torch.load(path, weights_only=False) and 0  # noqa: E731
        assert fork_run(recipe, [], tmp_path / "logs", job=job).code == 0
        assert marker.read_text() == "ran"


@FORKS_RUNS
@pytest.mark.parametrize("how", ["options not a mapping", "a state without the recipe's keys"])
def test_a_well_formed_but_foreign_checkpoint_is_refused_in_one_line(recipe, saved, tmp_path, how):
    run = tmp_path / "run"
    shutil.copytree(saved, run)
    folder = run / (run / "latest").read_text()
    manifest = json.loads((folder / "manifest.json").read_bytes())
    if how == "options not a mapping":
        manifest["options"], path = [], folder / "manifest.json"
    else:  # tensors only, its SHA-256 written into the manifest
        buffer = io.BytesIO()
        torch.save({"weights": torch.zeros(2)}, buffer)
        (folder / "state.pt").write_bytes(buffer.getvalue())
        manifest["sha256"]["state.pt"] = hashlib.sha256(buffer.getvalue()).hexdigest()
        path = folder / "state.pt"
    (folder / "manifest.json").write_text(json.dumps(manifest))
    done = fork_run(recipe, argv(run), tmp_path / "logs")
    assert done.code == 1
    assert one_line(done.err).startswith(f"recipe.py: refused {path}: ")


@FORKS_RUNS
@pytest.mark.parametrize(("option", "other"), [("accum", "2"), ("steps", "151"), ("seed", "6")])
def test_a_folder_made_with_other_options_is_refused_naming_the_option(
    recipe, saved, tmp_path, option, other
):
    run = tmp_path / "run"
    shutil.copytree(saved, run)
    before = snapshot(run)
    done = fork_run(recipe, argv(run, **{option: other}), tmp_path / "logs")
    assert done.code == 2, done.err
    made = OPTIONS[f"--{option}"]
    assert one_line(done.err).startswith(f"recipe.py: {run} was made with --{option} {made}, ")
    assert done.out == "" and snapshot(run) == before


@FORKS_RUNS
def test_a_folder_made_with_another_device_is_refused_naming_it(recipe, saved, tmp_path):
    """No GPU here: the folder's manifest is edited to say it was made with --device cuda,
    and the run with --device cpu (the default) is refused in one line, exit code 2."""
    run = tmp_path / "run"
    shutil.copytree(saved, run)
    path = run / (run / "latest").read_text() / "manifest.json"
    manifest = json.loads(path.read_bytes())
    assert manifest["options"]["device"] == "cpu"
    manifest["options"]["device"] = "cuda"
    path.write_text(json.dumps(manifest))
    before = snapshot(run)
    done = fork_run(recipe, argv(run), tmp_path / "logs")
    assert done.code == 2, done.err
    assert one_line(done.err) == (
        f"recipe.py: {run} was made with --device cuda, not cpu: "
        "use the same or another --output-dir\n"
    )
    assert done.out == "" and snapshot(run) == before


BAD_OPTIONS = {
    "--steps 0": (["--steps", "0"], "--steps must be at least 1"),
    "--steps x": (["--steps", "x"], "--steps: invalid int value: 'x'"),
    "no --output-dir": (None, "the following arguments are required: --output-dir"),
    "--output-dir a file": (["--output-dir", "FILE"], "is a file, not a folder"),
    "--device cuda": (["--device", "cuda"], "--device cuda: no CUDA device here"),
    "--seed -1": (["--seed", "-1"], "--seed must be at least 0"),
}


@FORKS_RUNS
@pytest.mark.parametrize("case", list(BAD_OPTIONS))
def test_bad_options_exit_2_in_one_line(recipe, tmp_path: Path, case: str):
    words, says = BAD_OPTIONS[case]
    if case == "--device cuda" and torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    run, file = tmp_path / "run", tmp_path / "file"
    file.write_text("not a folder")
    if words is None:
        args = [w for w in argv(run) if w not in ("--output-dir", str(run))]
    else:
        args = [*argv(run), *(str(file) if w == "FILE" else w for w in words)]
    done = fork_run(recipe, args, tmp_path / "logs")
    assert done.code == 2 and done.out == ""
    assert says in one_line(done.err) and done.err.endswith(" (see --help)\n")
    assert not run.exists()


# --- real processes ----------------------------------------------------------------------------

# One intra-op thread, like the forked runs: with two, on two busy cores, OpenMP's waiting
# threads spin and a run costs three to four times the CPU. The campaign's real processes
# keep the default.
TIMEOUT_REAL = 120
ONE_THREAD = {**os.environ, "OMP_NUM_THREADS": "1"}
SIGKILL_AFTER, SIGTERM_AFTER, SIGINT_AFTER = 16, 37, 52  # lines printed before the signal
# `python -c DISK_FULL_AT_10 snippets/recipe.py ARGV`: the recipe, run as its own `__main__`
# would run it, but every write into the save of update 10 fails as a full disk does.
DISK_FULL_AT_10 = """\
import errno, importlib.util, os, sys
spec = importlib.util.spec_from_file_location("recipe", sys.argv[1])
recipe = importlib.util.module_from_spec(spec)
spec.loader.exec_module(recipe)
write_synced = recipe.write_synced
def full(path, data):
    if path.parent.name == "tmp-step-000010":
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
    write_synced(path, data)
recipe.write_synced = full
sys.exit(recipe.main(sys.argv[2:]))
"""


@dataclass
class Real:
    """Six real processes of the quick tier, started together (see the fixture); the
    SIGKILL test starts a seventh, the same command run again."""

    bad_options: subprocess.Popen[str]
    forged: subprocess.Popen[str]
    full_disk: subprocess.Popen[str]
    sigkill: HeldBack
    sigterm: HeldBack
    sigint: HeldBack
    folder: Path


@pytest.fixture(scope="module")
def real(
    reference: Reference, saved: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Real]:
    folder = tmp_path_factory.mktemp("real")
    forged, _ = damaged(saved, folder / "forged", "a forged pickle, its SHA-256 in the manifest")

    def start(
        name: str, args: list[str], program: list[str] | None = None
    ) -> subprocess.Popen[str]:
        options: dict[str, Any] = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
        words = [*program, *args] if program else command(args)
        return subprocess.Popen(words, text=True, env=ONE_THREAD, **options)

    processes = Real(
        start("bad", argv(folder / "bad" / "run", steps="x")),
        start("forged", argv(forged)),
        start("full", argv(folder / "full"), [sys.executable, "-c", DISK_FULL_AT_10, str(RECIPE)]),
        HeldBack(
            argv(folder / "sigkill"),
            reference.allowed(SIGKILL_AFTER),
            folder / "sigkill.err",
            env=ONE_THREAD,
        ),
        HeldBack(
            argv(folder / "sigterm"),
            reference.allowed(SIGTERM_AFTER),
            folder / "sigterm.err",
            env=ONE_THREAD,
        ),
        HeldBack(
            argv(folder / "sigint"),
            reference.allowed(SIGINT_AFTER),
            folder / "sigint.err",
            env=ONE_THREAD,
        ),
        folder,
    )
    yield processes
    for process in (processes.bad_options, processes.forged, processes.full_disk):
        if process.poll() is None:
            process.kill()
        process.communicate()
    processes.sigkill.close()
    processes.sigterm.close()
    processes.sigint.close()


@pytest.fixture(scope="module", autouse=True)
def _real_processes_start_first(request: pytest.FixtureRequest) -> None:
    """Each real process spends about two seconds of CPU importing torch: start them all
    before the forked runs, so that this overlaps them (if a selected test uses them)."""
    items = [i for i in request.session.items if getattr(i, "module", None) is request.module]
    if any("real" in getattr(item, "fixturenames", ()) for item in items):
        request.getfixturevalue("real")


@FORKS_RUNS
def test_a_real_process_exits_2_in_one_line_on_bad_options(real: Real):
    out, err = real.bad_options.communicate(timeout=TIMEOUT_REAL)
    assert real.bad_options.returncode == 2 and out == ""
    assert "--steps: invalid int value: 'x'" in one_line(err)
    assert not (real.folder / "bad").exists()


@FORKS_RUNS
def test_a_real_process_never_runs_a_forged_pickle(real: Real):
    out, err = real.forged.communicate(timeout=TIMEOUT_REAL)
    assert real.forged.returncode == 1 and out == ""
    run = real.folder / "forged" / "run"
    path = run / (run / "latest").read_text() / "state.pt"
    assert one_line(err) == f"recipe.py: refused {path}: {UNPICKLE}\n"
    assert not (real.folder / "forged" / "marker").exists()


@FORKS_RUNS
def test_a_real_process_ends_with_a_traceback_and_exit_1_on_a_full_disk(real: Real):
    """recipe.md: an error it does not expect ends the run with Python's traceback and exit
    code 1. The save of update 10 meets a full disk; the one of update 5 is `latest` still."""
    out, err = real.full_disk.communicate(timeout=TIMEOUT_REAL)
    assert real.full_disk.returncode == 1, err
    assert err.startswith("Traceback (most recent call last):\n"), err
    assert err.endswith(
        "OSError: [Errno 28] No space left on device: "
        f"'{real.folder / 'full' / 'tmp-step-000010' / 'state.pt'}'\n"
    ), err
    assert out.splitlines()[-1].startswith("update 10 ")
    progress = verify(real.folder / "full")
    assert progress is not None and progress["update"] == 5


@FORKS_RUNS
def test_a_real_sigkill_then_the_same_command_resumes_bitwise(reference, real):
    """The process prints 16 lines, computes update 17 (the short window that ends epoch 0)
    and blocks printing it: SIGKILL. `latest` (update 15) verifies at once; the same command,
    run again in a new process (one thread, as the killed one), crosses the epoch boundary
    again and ends bitwise."""
    run = real.folder / "sigkill"
    real.sigkill.wait_full()
    code, out, err = real.sigkill.kill()
    assert code == -signal.SIGKILL and err == ""
    assert out.splitlines() == reference.lines[:SIGKILL_AFTER]
    progress = verify(run)
    assert progress is not None
    assert (progress["update"], progress["epoch"], progress["micro"]) == (15, 0, 45)
    again = subprocess.run(
        command(argv(run)), capture_output=True, text=True, env=ONE_THREAD, timeout=TIMEOUT_REAL
    )
    assert again.returncode == 0 and again.stderr == "", again.stderr
    lines = again.stdout.splitlines()
    assert lines[0] == f"resumed from {run}/step-000015 at update 15"
    finished = f"finished at update {reference.progress['update']}: {run}/final.pt"
    assert lines[1:] == [*reference.lines[15:-1], finished]
    assert_bitwise(run / "final.pt", reference.weights)


@FORKS_RUNS
def test_a_real_sigterm_exits_75_after_saving_and_the_rerun_is_bitwise(
    recipe, reference, real, tmp_path
):
    """The process prints 37 lines and blocks printing the 38th: SIGTERM. Its handler only
    notes the signal; the recipe saves at that update boundary (not one of its --save-every)
    and exits 75."""
    run = real.folder / "sigterm"
    real.sigterm.wait_full()
    real.sigterm.process.send_signal(signal.SIGTERM)
    code, out, err = real.sigterm.release()
    assert code == 75 and err == ""
    lines = out.splitlines()
    assert lines[:-1] == reference.lines[: SIGTERM_AFTER + 1]
    assert lines[-1] == f"stopped by signal {signal.SIGTERM.value}: run again to resume"
    progress = verify(run)
    assert progress is not None and progress["update"] == 38 and stale(run) == []
    done = rerun(recipe, run, tmp_path / "logs", reference)
    assert done.lines[0] == f"resumed from {run}/step-000038 at update 38"


@FORKS_RUNS
def test_a_real_sigint_exits_75_after_saving_as_sigterm_does(recipe, reference, real, tmp_path):
    """The same with SIGINT (Ctrl-C), sent while the process blocks printing its 53rd line:
    only noted (no KeyboardInterrupt), a save at that update boundary (not one of its
    --save-every), exit 75."""
    run = real.folder / "sigint"
    real.sigint.wait_full()
    real.sigint.process.send_signal(signal.SIGINT)
    code, out, err = real.sigint.release()
    assert code == 75 and err == ""
    lines = out.splitlines()
    assert lines[:-1] == reference.lines[: SIGINT_AFTER + 1]
    assert lines[-1] == f"stopped by signal {signal.SIGINT.value}: run again to resume"
    progress = verify(run)
    assert progress is not None and progress["update"] == 53 and stale(run) == []
    done = rerun(recipe, run, tmp_path / "logs", reference)
    assert done.lines[0] == f"resumed from {run}/step-000053 at update 53"


# --- the slow tier: a random-kill campaign -------------------------------------------------------

CAMPAIGN_RECORD = "RECIPE_CAMPAIGN_RECORD"  # =1: write the committed file
COMMITTED = ROOT / "docs" / "assets" / "bench" / "recipe-campaign.json"
CAMPAIGN_SEED = 20261201
KILLS = 60  # at least 50
REAL_KILLS = 6  # of them, real processes killed from outside
# The files whose SHA-256 the record keeps: recipe.md's block checks them against the tree.
CAMPAIGN_SOURCES = (
    "snippets/recipe.py",
    "tests/recipe/test_recipe.py",
    "tests/support/recipe_runs.py",
)


@pytest.mark.slow
def test_a_random_kill_campaign_always_resumes_bitwise(recipe, reference, tmp_path: Path):
    """Chains of one to three SIGKILLs, each at a random moment: in a forked run, a random
    phase (`PHASES`) at or after a random update; in a real process (default threads), a
    random number of printed lines and a random sleep. After each kill, at once, `latest`
    and `best` verify; then the same command runs to the end, bitwise equal to the
    uninterrupted run."""
    started = provenance.start(tmp_path)
    rng = random.Random(CAMPAIGN_SEED)
    stop = reference.progress["update"]
    best = (reference.run / "best").read_text()
    best_at = int(best.removeprefix("step-"))  # the last new best
    tally: dict[str, Any] = {
        "kills": 0,
        "forked_kills": 0,
        "real_kills": 0,
        "mid_save_kills": 0,
        "real_mid_save_kills": 0,
        "verified_at_once": 0,
        "before_the_first_save": 0,
        "real_finished_first": 0,
        "phase_never_came": 0,
        "chains": 0,
        "resumed_bitwise": 0,
        "best_pointer_stale_at_end": 0,
        "phases": {},
    }
    real_at = sorted(rng.sample(range(KILLS), REAL_KILLS))  # which kills are real ones
    unhit = rng.sample(list(PHASES), len(PHASES))  # every phase once, then at random
    chain = 0
    while tally["kills"] < KILLS or unhit:
        chain += 1
        run, logs = tmp_path / f"chain-{chain}" / "run", tmp_path / f"chain-{chain}" / "logs"
        for _ in range(rng.randint(1, 3)):
            progress = verify(run)
            at = progress["update"] if progress else 0
            if real_at and tally["kills"] >= real_at[0]:
                if not real_kill(run, rng.randint(1, max(1, stop - at)), rng.uniform(0, 0.02)):
                    tally["real_finished_first"] += 1
                    break  # the run is over: a real kill comes in the next chain
                real_at.pop(0)
                tally["real_kills"] += 1
                tally["real_mid_save_kills"] += bool(stale(run))
                where = "a real process, after a random line and sleep"
            else:
                kill = random_kill(rng, run, at, stop, best_at, unhit)
                done = fork_run(recipe, argv(run), logs, kill)
                if done.code == 0:  # e.g. no rename: the folder was committed before
                    tally["phase_never_came"] += 1
                    break
                assert done.code == -signal.SIGKILL, (kill, done.code, done.err)
                tally["forked_kills"] += 1
                where = kill.phase
            tally["kills"] += 1
            tally["phases"][where] = tally["phases"].get(where, 0) + 1
            if where in unhit:
                unhit.remove(where)
            tally["mid_save_kills"] += bool(stale(run))
            # At once, before anything else touches the folder:
            if verify(run) is None:
                tally["before_the_first_save"] += 1
            else:
                verify(run, "best")
                tally["verified_at_once"] += 1
            if tally["kills"] >= KILLS and not unhit:
                break
        rerun(recipe, run, logs, reference)
        tally["chains"] += 1
        tally["resumed_bitwise"] += 1
        tally["best_pointer_stale_at_end"] += (run / "best").read_text() != best
        shutil.rmtree(run.parent)
    assert tally["kills"] >= 50 and tally["real_kills"] == REAL_KILLS
    assert tally["verified_at_once"] + tally["before_the_first_save"] == tally["kills"]
    assert tally["mid_save_kills"] > 0 and set(tally["phases"]) >= set(PHASES)
    assert tally["resumed_bitwise"] == tally["chains"]
    record(tally, started, reference, tmp_path)


def random_kill(
    rng: random.Random, run: Path, at: int, stop: int, best_at: int, unhit: list[str]
) -> Kill:
    """A random phase that should still come in a run resumed at update `at` (one not hit
    yet first), at or after a random update."""
    if at >= stop:
        return Kill("after tmp-final.pt, before its rename", stop)
    best_swaps = ("after the best swap, before the latest swap",)
    comes = [
        name
        for name in PHASES
        if (name not in best_swaps or at < best_at)
        and (name != "before an uncommitted folder is dropped" or stale(run))
    ]
    phase = next((name for name in unhit if name in comes), None) or rng.choice(comes)
    if phase == "before an uncommitted folder is dropped":
        return Kill(phase, at)  # it comes as the run starts
    last = best_at if phase in best_swaps else stop
    return Kill(phase, rng.randint(at + 1, last))


def real_kill(run: Path, lines: int, sleep: float) -> bool:
    """`python snippets/recipe.py`, default threads, SIGKILLed `sleep` seconds after its
    line number `lines` (a resumed run's first line says where it resumed); False if it
    finished first."""
    process = subprocess.Popen(command(argv(run)), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert process.stdout is not None
        for _ in range(lines + (run / "latest").exists()):
            process.stdout.readline()
        time.sleep(sleep)
        process.send_signal(signal.SIGKILL)
        _, err = process.communicate(timeout=TIMEOUT_REAL)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode in (0, -signal.SIGKILL), err.decode()
    return process.returncode == -signal.SIGKILL


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def record(
    tally: dict[str, Any], started: dict[str, Any], reference: Reference, tmp_path: Path
) -> None:
    """The campaign's figures as JSON (numbers and names; the pages word them): to the
    committed file with RECIPE_CAMPAIGN_RECORD=1, else under tmp_path, never into the
    repository by default. Provenance as the fault campaign records it (bench.provenance),
    and the SHA-256 of the files that ran."""
    results = {
        "campaign": tally,
        "campaign_seed": CAMPAIGN_SEED,
        "compared": f"{same_bytes.__module__}.{same_bytes.__qualname__}",  # final.pt's tensors
        "options": {k.removeprefix("--").replace("-", "_"): int(v) for k, v in OPTIONS.items()},
        "reference": {
            "stopped_early_at": reference.progress["update"],
            "epochs_begun": reference.progress["epoch"] + 1,
        },
        "sources": {name: sha256_of(ROOT / name) for name in CAMPAIGN_SOURCES},
        "threads": {"forked": 1, "real": "default"},
        "provenance": provenance.finish(started),
    }
    path = COMMITTED if os.environ.get(CAMPAIGN_RECORD) == "1" else tmp_path / COMMITTED.name
    text = json.dumps(results, indent=2, sort_keys=True) + "\n"
    atomic_write_bytes(path, text.encode("utf8"))
