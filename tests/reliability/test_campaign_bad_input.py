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
from campaign import global_state_kept, lab_command, record

from resume_lab.cli import EXIT_OK, EXIT_PREEMPTED, EXIT_REJECTED, EXIT_USAGE, main

RUN = ["train", "--output-dir", "run", "--steps", "12", "--save-every", "2", "--quiet"]


def truncate(run: Path) -> None:
    data = (run / "last.pt").read_bytes()
    (run / "last.pt").unlink()  # a new file: the numbered snapshot keeps its bytes
    (run / "last.pt").write_bytes(data[: len(data) // 3])


def edit_manifest(run: Path) -> None:
    manifest = json.loads((run / "last.json").read_text("utf8"))
    manifest["sha256"] = manifest["sha256"][::-1]
    (run / "last.json").unlink()
    (run / "last.json").write_text(json.dumps(manifest), "utf8")


def wrong_manifest_alone(run: Path) -> None:
    """last.pt copied away with the manifest of an earlier checkpoint, and nothing else."""
    wrong = (run / "step-000002.json").read_bytes()
    for path in run.iterdir():
        if path.name != "last.pt":
            path.unlink()
    (run / "last.json").write_bytes(wrong)


def remove_manifest(run: Path) -> None:
    (run / "last.json").unlink()


def only_last_pt(run: Path) -> None:
    for path in run.iterdir():
        if path.name != "last.pt":
            path.unlink()


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
        "truncated last.pt, resumed",
        "tampered or truncated file",
        truncate,
        RUN,
        EXIT_REJECTED,
        "run/last.pt does not match last.json",
    ),
    (
        "truncated last.pt, verified",
        "tampered or truncated file",
        truncate,
        ["verify", "run/last.pt"],
        EXIT_REJECTED,
        "run/last.pt does not match last.json",
    ),
    (
        "edited manifest, resumed",
        "manifest that does not match",
        edit_manifest,
        RUN,
        EXIT_REJECTED,
        "run/last.pt does not match last.json",
    ),
    (
        "edited manifest, verified",
        "manifest that does not match",
        edit_manifest,
        ["verify", "run/last.pt"],
        EXIT_REJECTED,
        "run/last.pt does not match last.json",
    ),
    (
        "the manifest of another checkpoint",
        "manifest that does not match",
        wrong_manifest_alone,
        RUN,
        EXIT_REJECTED,
        "run/last.pt does not match last.json",
    ),
    (
        "missing manifest, verified",
        "manifest that does not match",
        remove_manifest,
        ["verify", "run/last.pt"],
        EXIT_REJECTED,
        "run/last.pt: its manifest last.json is missing",
    ),
    (
        "missing manifest, nothing to vouch for last.pt",
        "manifest that does not match",
        only_last_pt,
        RUN,
        EXIT_REJECTED,
        "run/last.pt: its manifest last.json is missing",
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
    """A run that was preempted after 4 updates: run/last.pt and its snapshots."""
    folder = tmp_path_factory.mktemp("stopped") / "run"
    with global_state_kept(), contextlib.redirect_stderr(io.StringIO()):
        assert main([*RUN[:2], str(folder), *RUN[3:], "--stop-after", "4"]) == EXIT_PREEMPTED
    return folder


def prepared(workdir: Path, stopped_run: Path, setup) -> dict[str, bytes]:
    shutil.copytree(stopped_run, workdir / "run")
    if setup is file_in_the_way:
        setup(workdir)
    elif setup is not None:
        setup(workdir / "run")
    return files(workdir)


def files(workdir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(workdir)): p.read_bytes() for p in workdir.rglob("*") if p.is_file()}


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


def test_a_publish_cut_short_by_a_kill_is_completed_not_refused(
    tmp_path: Path, stopped_run, capsys
):
    """Not bad input: last.pt newer than last.json, and the numbered manifest that vouches for
    last.pt's bytes still beside it, is what a kill between the two renames of a publish leaves.
    `train` completes that publish, says so, and resumes."""
    run = tmp_path / "run"
    shutil.copytree(stopped_run, run)
    (run / "last.json").unlink()
    shutil.copyfile(run / "step-000002.json", run / "last.json")  # the previous manifest
    assert main([*RUN[:2], str(run), *RUN[3:]]) == EXIT_OK
    err = capsys.readouterr().err
    assert "completed the publish of last.pt that a kill interrupted" in err
    assert f"resumed from {run / 'last.pt'} at update 4" in err
    # The signature is exact: a manifest for the same update but another digest is an edit.
    edited = tmp_path / "edited"
    shutil.copytree(stopped_run, edited)
    edit_manifest(edited)
    assert main([*RUN[:2], str(edited), *RUN[3:]]) == EXIT_REJECTED
    assert "edited/last.pt does not match last.json" in capsys.readouterr().err
