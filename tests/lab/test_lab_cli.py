"""The command line, as a new user meets it: help, bad input, train/resume, verify."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from resume_lab.cli import (
    EXIT_OK,
    EXIT_PREEMPTED,
    EXIT_REJECTED,
    EXIT_SAVE_FAILED,
    EXIT_USAGE,
    main,
    normalise_argv,
)


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's own exits (--help, usage errors)
        code = exit_.code
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(err: str, *fragments: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def snapshot(folder: Path) -> dict[str, bytes | str]:
    """Every file below `folder` and where each pointer points."""
    entries: dict[str, bytes | str] = {}
    for path in sorted(folder.rglob("*")):
        name = str(path.relative_to(folder))
        if path.is_symlink():
            entries[name] = os.readlink(path)
        elif path.is_file():
            entries[name] = path.read_bytes()
    return entries


def test_help_shows_examples_and_exit_codes(capsys):
    code, out, _ = run(["--help"], capsys)
    assert code == 0
    assert "examples:" in out and "python -m resume_lab train" in out and "75" in out
    code, out, _ = run(["train", "--help"], capsys)
    assert code == 0 and "--stop-after" in out and "examples:" in out


def test_no_subcommand_means_demo():
    assert normalise_argv([]) == ["demo"]
    assert normalise_argv(["--seed", "3"]) == ["demo", "--seed", "3"]
    assert normalise_argv(["--help"]) == ["--help"]
    assert normalise_argv(["verify", "x"]) == ["verify", "x"]


BAD_INPUT = [
    (["demo", "--kill-at", "0"], "--kill-at 0 is outside 1..119"),
    (["demo", "--kill-at", "120"], "--kill-at 120 is outside 1..119"),
    (["demo", "--steps", "30", "--kill-at", "40"], "outside 1..29"),
    (["demo", "--steps", "1"], "--steps 2 or more"),
    (["--steps", "-1"], "argument --steps: must be positive, got -1"),
    (["demo", "--steps", "0"], "must be positive, got 0"),
    (["demo", "--accum", "two"], "expected a whole number, got 'two'"),
    (["demo", "--seed", "-5"], "--seed: must be in 0..4294967295"),
    (["demo", "--output-dir", "/proc/x"], "cannot write to output folder /proc/x"),
    (["train"], "the following arguments are required: --output-dir"),
    (["train", "--output-dir", "d", "--save-every", "0"], "--save-every: must be positive"),
    (["train", "--output-dir", "d", "--keep", "-2"], "--keep: must be positive"),
    (["train", "--output-dir", "d", "--time-budget", "0"], "--time-budget: must be a positive"),
    (["train", "--output-dir", "d", "--time-budget", "nan"], "--time-budget: must be a positive"),
    (["train", "--output-dir", "/proc/x"], "cannot write to output folder /proc/x"),
    (["verify", "missing"], "missing: no such file or folder"),
    (["bogus"], "invalid choice: 'bogus'"),
]


@pytest.mark.parametrize(("argv", "message"), BAD_INPUT, ids=[" ".join(a) for a, _ in BAD_INPUT])
def test_bad_input_is_one_line_exit_2(argv, message, capsys):
    code, out, err = run(argv, capsys)
    assert code == EXIT_USAGE
    assert_one_line_error(err, message)
    assert out == ""
    assert not Path("d").exists()  # nothing was written


def test_demo_refuses_a_folder_it_did_not_write(tmp_path: Path, capsys):
    (tmp_path / "thesis.tex").write_text("precious", "utf8")
    code, _, err = run(
        ["demo", "--output-dir", str(tmp_path), "--steps", "4", "--kill-at", "2"], capsys
    )
    assert code == EXIT_USAGE
    assert_one_line_error(err, "thesis.tex", "choose an empty or new --output-dir")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["thesis.tex"]


def test_train_stop_resume_equals_uninterrupted(tmp_path: Path, capsys):
    args = ["train", "--steps", "30", "--save-every", "4", "--quiet"]
    assert run([*args, "--output-dir", str(tmp_path / "whole")], capsys)[0] == EXIT_OK
    pieces = [*args, "--output-dir", str(tmp_path / "pieces"), "--stop-after", "11"]
    codes = [run(pieces, capsys)[0] for _ in range(3)]
    assert codes == [EXIT_PREEMPTED, EXIT_PREEMPTED, EXIT_OK]
    for name in ("final.pt", "history.json"):
        assert (tmp_path / "whole" / name).read_bytes() == (tmp_path / "pieces" / name).read_bytes()
    history = json.loads((tmp_path / "pieces" / "history.json").read_text("utf8"))
    assert [r["step"] for r in history] == list(range(1, 31))
    timing = json.loads((tmp_path / "pieces" / "timing.json").read_text("utf8"))
    assert len(timing) == 30 and all(r["step_time"] > 0 for r in timing)
    # A finished run resumed again changes nothing.
    before = snapshot(tmp_path / "pieces")
    assert run(pieces, capsys)[0] == EXIT_OK
    after = snapshot(tmp_path / "pieces")
    assert (
        after["final.pt"] == before["final.pt"] and after["history.json"] == before["history.json"]
    )


def test_train_refuses_other_configuration_and_overwrites_nothing(tmp_path: Path, capsys):
    folder = tmp_path / "run"
    argv = ["train", "--output-dir", str(folder), "--steps", "20", "--stop-after", "5", "--quiet"]
    code, out, err = run(argv, capsys)
    assert code == EXIT_PREEMPTED
    assert "[train] stopped by --stop-after at update 5" in out + err
    before = snapshot(folder)
    code, _, err = run(["train", "--output-dir", str(folder), "--steps", "25", "--quiet"], capsys)
    assert code == EXIT_USAGE
    assert_one_line_error(
        err, "another configuration", "steps=20 in the file, 25 now", "new --output-dir"
    )
    assert snapshot(folder) == before


def test_train_rejects_tampered_checkpoint_and_overwrites_nothing(tmp_path: Path, capsys):
    folder = tmp_path / "run"
    argv = ["train", "--output-dir", str(folder), "--steps", "20", "--save-every", "2", "--quiet"]
    assert run([*argv, "--stop-after", "5"], capsys)[0] == EXIT_PREEMPTED
    state = folder / "last" / "state.pt"  # step-000005/state.pt
    data = bytearray(state.read_bytes())
    data[-200] ^= 0xFF
    state.write_bytes(bytes(data))
    before = snapshot(folder)
    code, _, err = run(argv, capsys)
    assert code == EXIT_REJECTED
    assert_one_line_error(
        err, "step-000005/state.pt: expected", "found", "step-000004 verifies", "ln -sfn"
    )
    assert snapshot(folder) == before


def test_a_full_disk_is_one_line_and_keeps_the_previous_checkpoint(
    tmp_path: Path, capsys, monkeypatch
):
    folder = tmp_path / "run"
    argv = ["train", "--output-dir", str(folder), "--steps", "20", "--save-every", "2", "--quiet"]
    assert run([*argv, "--stop-after", "3"], capsys)[0] == EXIT_PREEMPTED
    before = snapshot(folder)

    def full_disk(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full_disk)
    code, _, err = run(argv, capsys)
    assert code == EXIT_SAVE_FAILED
    progress, error = err.rstrip("\n").rsplit("\n", 1)  # --quiet keeps the plain log lines
    assert "Traceback" not in progress
    assert_one_line_error(error, "No space left on device", "rerun the same command")
    assert snapshot(folder) == before


def test_verify_reports_and_rejects(tmp_path: Path, capsys):
    folder = tmp_path / "run"
    run(["train", "--output-dir", str(folder), "--steps", "12", "--quiet"], capsys)
    for path in (folder, folder / "last", folder / "step-000012"):
        code, out, err = run(["verify", str(path)], capsys)
        assert code == EXIT_OK and err == ""
        assert "OK" in out and "step-000012/: 1 file" in out and "blake3" in out
        assert "5,508 parameters" in out and "step 12" in out
    code, out, _ = run(["verify", str(folder / "final.pt")], capsys)
    assert code == EXIT_OK and "a flat state_dict: 6 tensors, 5,508 values" in out
    code, out, _ = run(["verify", str(folder / "last" / "state.pt")], capsys)
    assert code == EXIT_OK and "step-000012/: 1 file" in out  # the whole checkpoint
    code, _, err = run(["verify", str(folder / "history.jsonl")], capsys)
    assert code == EXIT_REJECTED
    assert_one_line_error(err, "history.jsonl: not a checkpoint", "run folder")

    state = folder / "step-000012" / "state.pt"
    state.write_bytes(state.read_bytes()[:-10])  # truncated
    code, out, err = run(["verify", str(folder / "last")], capsys)
    assert code == EXIT_REJECTED and out == ""
    assert_one_line_error(err, "rejected", "step-000012/state.pt: expected", "found")
    (folder / "final.json").unlink()
    code, _, err = run(["verify", str(folder / "final.pt")], capsys)
    assert code == EXIT_REJECTED
    assert_one_line_error(err, "final.pt: no final.json beside it")
    (folder / "step-000012" / "manifest.json").unlink()
    code, _, err = run(["verify", str(folder)], capsys)
    assert code == EXIT_REJECTED
    assert_one_line_error(err, "manifest.json: missing", "not a committed checkpoint")


class CountingStream:
    def __init__(self) -> None:
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        return len(text)

    def flush(self) -> None:
        pass


def test_an_error_line_is_written_in_one_call(monkeypatch, tmp_path: Path):
    """Under torchrun every rank writes to one stderr; a line written in two
    calls (print's text, then its newline) can run into another rank's."""
    stream = CountingStream()
    monkeypatch.setattr("sys.stderr", stream)
    code = main(["verify", str(tmp_path / "missing")])
    assert code == EXIT_USAGE
    assert len(stream.writes) == 1, stream.writes
    assert stream.writes[0].startswith("resume-lab verify: error: ")
    assert stream.writes[0].endswith("\n") and stream.writes[0].count("\n") == 1
