"""Campaign, parts 3 and 4: damaged and malicious checkpoints are never trusted.

Part 3 flips single bits anywhere in a real training checkpoint (spread over every region of
the file: each ZIP entry's header and data, the pickle, the central directory), truncates it
at random lengths, and edits or removes its manifest. verify() and load_checkpoint() must refuse
every one, BEFORE anything is unpickled (torch.load and pickle are replaced by functions that
fail the test), with a message that names the file and gives the expected and actual digest
(or size). Edits to the manifest's claims about the contents (step, configuration) can only be
checked against the contents: they are refused after the restricted weights_only load.

Part 4 ships a pickle that runs code when loaded, with a manifest that matches it exactly: the
digest passes, and the restricted loader refuses it. A marker file proves the code never ran,
and a control proves that the same payload does run under an unrestricted load.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import pickle
import random
import subprocess
from pathlib import Path

import pytest
import torch
from campaign import (
    MINIMUMS,
    a_training_state,
    flip_bit,
    forbid_unpickling,
    lab_command,
    record,
    zip_regions,
)

from resume_lab.checkpoint import (
    CheckpointError,
    load_checkpoint,
    manifest_path,
    save_checkpoint,
    verify,
)
from resume_lab.cli import EXIT_REJECTED, main

FULL = pytest.mark.full
# (flips, truncations) per mode; the full run exceeds the 1,000 flips.
COUNTS = {"quick": (80, 20), "full": (2000, 500)}


@pytest.fixture(autouse=True)
def one_thread():
    torch.set_num_threads(1)


def saved_checkpoint(folder: Path, step: int = 12) -> tuple[Path, bytes, dict]:
    folder.mkdir(exist_ok=True)
    state = a_training_state(step)
    path = folder / "last.pt"
    manifest = save_checkpoint(state, path, step=step, config=state["config"])
    return path, path.read_bytes(), manifest


def refused_before_unpickling(path: Path) -> str:
    """verify() and load_checkpoint() both refuse `path` without unpickling; the message."""
    messages = []
    with forbid_unpickling() as attempts:
        for check in (verify, load_checkpoint):
            try:
                check(path)
            except CheckpointError as err:
                messages.append(str(err))
            else:
                raise AssertionError(f"{check.__name__} accepted a damaged {path.name}")
    assert attempts == [], attempts
    assert messages[0] == messages[1]
    return messages[0]


@pytest.mark.parametrize("mode", ["quick", pytest.param("full", marks=FULL)])
def test_every_flip_and_truncation_is_refused_before_unpickling(tmp_path: Path, mode):
    flips, truncations = COUNTS[mode]
    rng = random.Random(f"tampering-{mode}")
    path, good, manifest = saved_checkpoint(tmp_path)
    expected = f"expected {len(good)} bytes with sha256 {manifest['sha256']}"
    regions = zip_regions(good)
    hit: dict[str, int] = dict.fromkeys(regions, 0)

    for n in range(flips):
        if n % 2:  # half uniform over the file, half in each of its regions in turn
            bit = rng.randrange(8 * len(good))
        else:
            start, end = regions[sorted(regions)[n // 2 % len(regions)]]
            bit = rng.randrange(8 * start, 8 * end)
        hit.update({r: hit[r] + 1 for r, (s, e) in regions.items() if s <= bit // 8 < e})
        damaged = flip_bit(good, bit)
        path.write_bytes(damaged)
        message = refused_before_unpickling(path)
        actual = hashlib.sha256(damaged).hexdigest()
        assert message.startswith(f"{path} does not match last.json")
        assert expected in message and f"found {len(good)} bytes with sha256 {actual}" in message

    for _ in range(truncations):
        size = rng.randrange(len(good))  # 0 (an empty file) up to one byte short
        path.write_bytes(good[:size])
        message = refused_before_unpickling(path)
        actual = hashlib.sha256(good[:size]).hexdigest()
        assert expected in message and f"found {size} bytes with sha256 {actual}" in message

    path.write_bytes(good)
    load_checkpoint(path)  # and the intact file still loads
    assert all(hit.values()), f"regions never hit: {[r for r, n in hit.items() if not n]}"
    if mode == "full":
        assert flips >= MINIMUMS["flips"]
        record(
            "tampering",
            flips=flips,
            truncations=truncations,
            regions=len(regions),
            checkpoint_bytes=len(good),
            losses=0,
            trusted_wrongly=0,  # any acceptance or unpickling attempt failed the test above
        )


def edit(field: str, value):
    def apply(manifest: dict) -> dict:
        return {**manifest, field: value(manifest[field]) if callable(value) else value}

    return apply


def other_digit(sha: str) -> str:
    return ("1" if sha[0] == "0" else "0") + sha[1:]


# Edits to the digest fields: refused before unpickling, naming the file and both digests.
DIGEST_EDITS = {
    "sha256, one hex digit changed": edit("sha256", other_digit),
    "sha256 of the empty file": edit("sha256", hashlib.sha256(b"").hexdigest()),
    "bytes one more": edit("bytes", lambda n: n + 1),
    "bytes one less": edit("bytes", lambda n: n - 1),
    "bytes zero": edit("bytes", 0),
}
# Damage to the manifest itself: refused before unpickling, naming the file and the problem.
STRUCTURE_EDITS = {
    "missing manifest": (None, "its manifest last.json is missing"),
    "empty manifest": (b"", "its manifest last.json is not valid JSON"),
    "truncated manifest": (lambda text: text[: len(text) // 2], "last.json is not valid JSON"),
    "not UTF-8": (b"\xff\xfe{}", "last.json is not valid JSON"),
    "a list, not an object": (b"[]", "last.json lacks bytes, sha256, step, versions, config"),
    "sha256 removed": (lambda text: text.replace(b'"sha256"', b'"sha"'), "lacks sha256"),
    "bytes removed": (lambda text: text.replace(b'"bytes"', b'"size"'), "lacks bytes"),
}


def test_every_manifest_edit_is_refused(tmp_path: Path):
    path, good, manifest = saved_checkpoint(tmp_path)
    text = manifest_path(path).read_bytes()
    actual = manifest["sha256"]

    for name, change in DIGEST_EDITS.items():
        edited = change(manifest)
        manifest_path(path).write_text(json.dumps(edited), "utf8")
        message = refused_before_unpickling(path)
        assert str(path) in message, name
        assert f"expected {edited['bytes']} bytes with sha256 {edited['sha256']}" in message, name
        assert f"found {len(good)} bytes with sha256 {actual}" in message, name

    for name, (change, fragment) in STRUCTURE_EDITS.items():
        if change is None:
            manifest_path(path).unlink()
        else:
            manifest_path(path).write_bytes(change(text) if callable(change) else change)
        message = refused_before_unpickling(path)
        assert message.startswith(str(path)) and fragment in message, (name, message)

    # A mixed-up pair: the manifest of another (complete, genuine) checkpoint of the same run.
    other_path, _, other = saved_checkpoint(tmp_path / "other", step=16)
    path.write_bytes(good)
    manifest_path(path).write_bytes(manifest_path(other_path).read_bytes())
    message = refused_before_unpickling(path)
    assert f"sha256 {other['sha256']}, found {len(good)} bytes with sha256 {actual}" in message

    # Claims about the contents: checked against the contents after the restricted load.
    for field, value in (("step", 13), ("config", {**manifest["config"], "lr": 0.1})):
        manifest_path(path).write_text(json.dumps({**manifest, field: value}), "utf8")
        verify(path)  # the digest is right: these bytes are the ones that were saved
        with pytest.raises(CheckpointError, match=f"the manifest's '{field}'"):
            load_checkpoint(path)
    assert DIGEST_EDITS and STRUCTURE_EDITS


# --- part 4: a malicious pickle with a matching manifest -------------------------------------


class RunsCode:
    """Unpickling this calls exec(): the classic pickle attack."""

    def __init__(self, source: str) -> None:
        self.source = source

    def __reduce__(self):
        return (exec, (self.source,))


def payload(marker: Path) -> RunsCode:
    return RunsCode(f"open({str(marker)!r}, 'w').write('the payload ran')")


def forge(path: Path, obj, *, legacy: bool = False) -> None:
    """Write `obj` as a checkpoint with a manifest that matches it byte for byte."""
    if legacy:
        path.write_bytes(pickle.dumps(obj, protocol=2))  # a plain pickle, not torch's ZIP
    else:
        torch.save(obj, path)
    data = path.read_bytes()
    manifest = {
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "step": 1,
        "config": {},
        "versions": {},
    }
    manifest_path(path).write_text(json.dumps(manifest), "utf8")


FORGERIES = {
    "a torch.save file": lambda marker: ({"step": 1, "model": payload(marker)}, False),
    "a plain pickle": lambda marker: ({"step": 1, "model": payload(marker)}, True),
    "the payload as the whole file": lambda marker: (payload(marker), False),
}


@pytest.mark.parametrize("forgery", FORGERIES)
def test_a_malicious_checkpoint_with_a_matching_manifest_never_runs(
    tmp_path: Path, forgery, capsys
):
    # The control: unpickled without restriction, this very payload runs.
    control = tmp_path / "control-ran"
    obj, legacy = FORGERIES[forgery](control)
    forge(tmp_path / "control.pt", obj, legacy=legacy)
    with contextlib.suppress(RuntimeError):  # a plain pickle runs, then fails torch's format check
        torch.load(tmp_path / "control.pt", weights_only=False)
    assert control.read_text() == "the payload ran"

    marker = tmp_path / "ran"
    obj, legacy = FORGERIES[forgery](marker)
    evil = tmp_path / "run" / "last.pt"
    evil.parent.mkdir()
    forge(evil, obj, legacy=legacy)
    verify(evil)  # the digest matches: a digest proves "unchanged", not "safe"
    with pytest.raises(CheckpointError, match="matches its manifest but cannot be loaded safely"):
        load_checkpoint(evil)
    # The command line refuses it too, whether asked to verify it or to resume from it.
    assert main(["verify", str(evil)]) == EXIT_REJECTED
    argv = ["train", "--output-dir", str(evil.parent), "--steps", "4", "--quiet"]
    assert main(argv) == EXIT_REJECTED
    err = capsys.readouterr().err
    assert err.count("cannot be loaded safely") == 2 and "Traceback" not in err
    assert not marker.exists(), "the payload ran"


@FULL
def test_a_malicious_checkpoint_is_refused_by_a_real_process(tmp_path: Path):
    marker = tmp_path / "ran"
    forge(tmp_path / "evil.pt", {"step": 1, "model": payload(marker)})
    result = subprocess.run(
        lab_command("verify", str(tmp_path / "evil.pt")),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == EXIT_REJECTED, result.stderr
    assert "cannot be loaded safely" in result.stderr and "Traceback" not in result.stderr
    assert not marker.exists()
    record(
        "malicious",
        forgeries=len(FORGERIES),
        refused_by_a_new_process=1,
        ran=0,
        losses=0,
        trusted_wrongly=0,
    )
