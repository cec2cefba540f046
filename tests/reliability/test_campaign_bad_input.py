"""Campaign, part 8: every kind of bad input in the lab issue's list gets its clear message.

The list: a kill point outside 1..steps-1, non-positive numbers, an unwritable output folder, a
checkpoint made with another configuration, a tampered or truncated file, a manifest that does
not match. Each case must give one line that names the problem, a non-zero exit (2 for usage
errors, 1 for a refused checkpoint), no traceback, and overwrite nothing.

tests/lab/test_lab_cli.py already checks many cases in-process; the table below adds the ones
it does not have, and at least one per kind. Quick: in this process. Full: each case as a new
`python -m resume_lab` process, as a user at a shell would meet it.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from campaign import global_state_kept, lab_command, listing, record

from resume_lab.cli import EXIT_OK, EXIT_PREEMPTED, EXIT_REJECTED, EXIT_USAGE, main

RUN = ["train", "--output-dir", "run", "--steps", "12", "--save-every", "2", "--quiet"]


def truncate(run: Path) -> None:
    state = run / "step-000004" / "state.pt"
    data = state.read_bytes()
    state.write_bytes(data[: len(data) // 3])


def edit_manifest(run: Path) -> None:
    path = run / "step-000004" / "manifest.json"
    manifest = json.loads(path.read_text("utf8"))
    entry = manifest["files"]["state.pt"]
    entry["digest"] = entry["digest"][::-1]
    path.write_text(json.dumps(manifest), "utf8")


def other_manifest(run: Path) -> None:
    """step-000004 holding the manifest of step-000002 (complete and genuine)."""
    shutil.copyfile(run / "step-000002" / "manifest.json", run / "step-000004" / "manifest.json")


def remove_manifest(run: Path) -> None:
    (run / "step-000004" / "manifest.json").unlink()


def remove_state(run: Path) -> None:
    (run / "step-000004" / "state.pt").unlink()


def add_file(run: Path) -> None:
    (run / "step-000004" / "notes.txt").write_text("added later", "utf8")


def dangling_last(run: Path) -> None:
    shutil.rmtree(run / "step-000004")


def file_in_the_way(workdir: Path) -> None:
    (workdir / "notes.txt").write_text("not a folder", "utf8")


# (what is wrong, kind in the issue's list, set-up, argv, exit code, what the line must say)
CASES: list[tuple[str, str, Callable[[Path], None] | None, list[str], int, str]] = [
    (
        "negative kill point",
        "kill point",
        None,
        ["demo", "--kill-at", "-3"],
        EXIT_USAGE,
        "--kill-at -3 is outside 1..119 (1 to --steps minus 1)",
    ),
    (
        "kill point at the last update",
        "kill point",
        None,
        ["demo", "--steps", "10", "--kill-at", "10"],
        EXIT_USAGE,
        "--kill-at 10 is outside 1..9",
    ),
    (
        "zero accumulation",
        "non-positive number",
        None,
        ["demo", "--accum", "0"],
        EXIT_USAGE,
        "argument --accum: must be positive, got 0",
    ),
    (
        "zero threads",
        "non-positive number",
        None,
        ["train", "--output-dir", "d", "--threads", "0"],
        EXIT_USAGE,
        "argument --threads: must be positive, got 0",
    ),
    (
        "zero stop-after",
        "non-positive number",
        None,
        ["train", "--output-dir", "d", "--stop-after", "0"],
        EXIT_USAGE,
        "argument --stop-after: must be positive, got 0",
    ),
    (
        "negative time budget",
        "non-positive number",
        None,
        ["train", "--output-dir", "d", "--time-budget", "-1"],
        EXIT_USAGE,
        "--time-budget: must be a positive, finite number of seconds, got -1",
    ),
    (
        "infinite time budget",
        "non-positive number",
        None,
        ["train", "--output-dir", "d", "--time-budget", "inf"],
        EXIT_USAGE,
        "--time-budget: must be a positive, finite number of seconds, got inf",
    ),
    (
        "output folder inside a file",
        "unwritable output folder",
        file_in_the_way,
        ["train", "--output-dir", "notes.txt/run"],
        EXIT_USAGE,
        "cannot write to output folder notes.txt/run: Not a directory",
    ),
    (
        "another accumulation",
        "another configuration",
        None,
        [*RUN, "--accum", "3"],
        EXIT_USAGE,
        "accum=2 in the file, 3 now",
    ),
    (
        "another seed",
        "another configuration",
        None,
        [*RUN, "--seed", "1"],
        EXIT_USAGE,
        "seed=0 in the file, 1 now",
    ),
    (
        "truncated state.pt, resumed",
        "tampered or truncated file",
        truncate,
        RUN,
        EXIT_REJECTED,
        "run/step-000004/state.pt: expected",
    ),
    (
        "truncated state.pt, verified",
        "tampered or truncated file",
        truncate,
        ["verify", "run/last"],
        EXIT_REJECTED,
        "run/step-000004/state.pt: expected",
    ),
    (
        "state.pt missing, verified",
        "tampered or truncated file",
        remove_state,
        ["verify", "run"],
        EXIT_REJECTED,
        "run/step-000004/state.pt: expected",
    ),
    (
        "a file added, resumed",
        "tampered or truncated file",
        add_file,
        RUN,
        EXIT_REJECTED,
        "run/step-000004/notes.txt: expected no such file",
    ),
    (
        "edited manifest, resumed",
        "manifest that does not match",
        edit_manifest,
        RUN,
        EXIT_REJECTED,
        "run/step-000004/manifest.json: expected blake3",
    ),
    (
        "edited manifest, verified",
        "manifest that does not match",
        edit_manifest,
        ["verify", "run/step-000004"],
        EXIT_REJECTED,
        "run/step-000004/manifest.json: expected blake3",
    ),
    (
        "the manifest of another checkpoint",
        "manifest that does not match",
        other_manifest,
        RUN,
        EXIT_REJECTED,
        "run/step-000004/state.pt: expected",
    ),
    (
        "missing manifest, verified",
        "manifest that does not match",
        remove_manifest,
        ["verify", "run/last"],
        EXIT_REJECTED,
        "run/step-000004/manifest.json: missing",
    ),
    (
        "missing manifest, resumed",
        "manifest that does not match",
        remove_manifest,
        RUN,
        EXIT_REJECTED,
        "run/step-000004/manifest.json: missing",
    ),
    (
        "last names a checkpoint that is gone",
        "manifest that does not match",
        dangling_last,
        ["verify", "run/last"],
        EXIT_REJECTED,
        "run/last points to step-000004, which does not exist",
    ),
]
ISSUE_KINDS = {
    "kill point",
    "non-positive number",
    "unwritable output folder",
    "another configuration",
    "tampered or truncated file",
    "manifest that does not match",
}


@pytest.fixture(scope="module")
def stopped_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run that was preempted after 4 updates: run/step-000002, run/step-000004, `last`."""
    folder = tmp_path_factory.mktemp("stopped") / "run"
    with global_state_kept(), contextlib.redirect_stderr(io.StringIO()):
        assert main([*RUN[:2], str(folder), *RUN[3:], "--stop-after", "4"]) == EXIT_PREEMPTED
    return folder


def prepared(workdir: Path, stopped_run: Path, setup) -> dict[str, bytes]:
    shutil.copytree(stopped_run, workdir / "run", symlinks=True)
    if setup is file_in_the_way:
        setup(workdir)
    elif setup is not None:
        setup(workdir / "run")
    return files(workdir)


def files(workdir: Path) -> dict[str, object]:
    return listing(workdir)


def check(code: int, out: str, err: str, expected_code: int, message: str) -> None:
    assert code == expected_code, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err and message in lines[0], lines[0]
    assert out == ""


def test_every_kind_in_the_issue_is_covered():
    assert {case[1] for case in CASES} == ISSUE_KINDS


@pytest.mark.parametrize(
    ("what", "kind", "setup", "argv", "code", "message"), CASES, ids=[c[0] for c in CASES]
)
def test_bad_input_is_one_clear_line_and_overwrites_nothing(
    tmp_path: Path, stopped_run, capsys, what, kind, setup, argv, code, message
):
    before = prepared(tmp_path, stopped_run, setup)  # the working directory is tmp_path
    try:
        returned = main(argv)
    except SystemExit as exit_:  # argparse's own exits
        returned = exit_.code
    out, err = capsys.readouterr()
    check(returned, out, err, code, message)
    assert files(tmp_path) == before


@pytest.mark.full
def test_bad_input_in_new_processes(tmp_path: Path, stopped_run):
    running = []
    for n, (what, _, setup, argv, code, message) in enumerate(CASES):
        workdir = tmp_path / f"case-{n}"
        workdir.mkdir()
        before = prepared(workdir, stopped_run, setup)
        child = subprocess.Popen(
            lab_command(*argv),
            cwd=workdir,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        running.append((what, workdir, before, child, code, message))
        if len(running) >= 2 or n == len(CASES) - 1:  # two at a time: two cores
            for what, workdir, before, child, code, message in running:
                out, err = child.communicate(timeout=300)
                check(child.returncode, out, err, code, message)
                assert files(workdir) == before, what
            running = []
    record("bad_input", cases=len(CASES), kinds=len(ISSUE_KINDS), losses=0)


def test_what_a_kill_leaves_is_removed_at_the_next_start_and_nothing_is_repaired(
    tmp_path: Path, stopped_run, capsys
):
    """Not bad input: what a kill leaves in the run folder (a temporary checkpoint directory, a
    temporary pointer, a checkpoint directory whose manifest was never written). `last` verifies
    as it is; `train` removes the leftovers, says so, and resumes from `last`."""
    run = tmp_path / "run"
    shutil.copytree(stopped_run, run, symlinks=True)
    shutil.copytree(run / "step-000004", run / "tmp-step-000006-0a1b2c3d")
    (run / "step-000006").mkdir()
    (run / "step-000006" / "state.pt").write_bytes(b"half written")
    (run / "last.tmp-0a1b2c3d").symlink_to("step-000002")
    assert main(["verify", str(run / "last")]) == EXIT_OK
    assert main([*RUN[:2], str(run), *RUN[3:]]) == EXIT_OK
    err = capsys.readouterr().err
    for name in ("last.tmp-0a1b2c3d", "step-000006", "tmp-step-000006-0a1b2c3d"):
        assert f"removed {name}, left by an interrupted save" in err, err
    assert f"resumed from {run / 'last'} -> step-000004 at update 4" in err
    assert "repair" not in err
