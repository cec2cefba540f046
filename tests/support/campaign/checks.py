"""The campaign's checks: what a restart would find in a run folder, what was trusted wrongly,
what a clean save leaves; and the helpers that damage files or forbid unpickling."""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from page_fences.isolation import isolated
from resume_lab import state_keys as keys
from resume_lab.checkpoint import MANIFEST, TEMP_PREFIX, CheckpointError, load_checkpoint, verify
from resume_lab.history_log import HISTORY_LOG, read_history
from resume_lab.loop import DETERMINISTIC_FIELDS
from resume_lab.resume import training_state
from resume_lab.run_folder import BEST, LAST, POINTERS, STEP_NAME, clean_start, committed, pointed


@contextlib.contextmanager
def global_state_kept() -> Iterator[None]:
    """For fixtures wider than one test (the root conftest restores per test): leave the
    global state (RNGs, threads, dtype, deterministic mode, ...) as it was found, unseeded."""
    with isolated(seed=None):
        yield


def trainer_state(trainer: Any) -> dict[str, Any]:
    """Everything a trainer would resume with, plus its per-update records, without what
    legitimately differs between runs (wall-clock step times, versions)."""
    state = training_state(trainer, {})
    state.pop(keys.VERSIONS)
    state[keys.HISTORY] = [
        {name: record[name] for name in DETERMINISTIC_FIELDS} for record in trainer.history
    ]
    return state


def saved_state(checkpoint: Path) -> dict[str, Any]:
    """A committed checkpoint's state (verified, weights_only), without its versions."""
    state, _ = load_checkpoint(checkpoint)
    state.pop(keys.VERSIONS)
    return state


@contextlib.contextmanager
def forbid_unpickling() -> Iterator[list[str]]:
    """Every way the lab could unpickle raises; the list collects any attempt, to be asserted."""
    attempts: list[str] = []
    saved = {
        (torch, "load"): torch.load,
        (pickle, "load"): pickle.load,
        (pickle, "loads"): pickle.loads,
        (pickle, "Unpickler"): pickle.Unpickler,
    }

    def forbidden(name: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            attempts.append(name)
            raise AssertionError(f"{name} was called on a file that had not been verified")

        return call

    for (module, name), _ in saved.items():
        setattr(module, name, forbidden(f"{module.__name__}.{name}"))
    try:
        yield attempts
    finally:
        for (module, name), original in saved.items():
            setattr(module, name, original)


def flip_bit(data: bytes, bit: int) -> bytes:
    damaged = bytearray(data)
    damaged[bit // 8] ^= 1 << (bit % 8)
    return bytes(damaged)


def zip_regions(data: bytes) -> dict[str, tuple[int, int]]:
    """Byte ranges of a torch.save file: each entry (local header + data), then the directory."""
    regions = {}
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        infos = sorted(archive.infolist(), key=lambda info: info.header_offset)
        for info in infos:
            start = info.header_offset
            name_len, extra_len = np.frombuffer(data[start + 26 : start + 30], dtype="<u2")
            end = start + 30 + int(name_len) + int(extra_len) + info.compress_size
            regions[info.filename.split("/", 1)[-1]] = (start, end)
        directory = max(end for _, end in regions.values())
    eocd = data.rfind(b"PK\x05\x06")
    regions["central directory"] = (directory, eocd)
    regions["end of archive"] = (eocd, len(data))
    return regions


def temporaries(folder: Path) -> list[str]:
    """What an interrupted save leaves in a run folder: temporary checkpoint directories,
    temporary pointers, checkpoint directories without a manifest."""
    if not folder.is_dir():
        return []
    left = []
    for path in sorted(folder.iterdir()):
        pointer_tmp = any(path.name.startswith(f"{p}.{TEMP_PREFIX}") for p in POINTERS)
        uncommitted = bool(STEP_NAME.fullmatch(path.name)) and not (path / MANIFEST).is_file()
        if path.name.startswith(TEMP_PREFIX) or pointer_tmp or uncommitted:
            left.append(path.name)
    return left


def pointer_exists(folder: Path, name: str) -> bool:
    return (folder / name).is_symlink() or (folder / name).exists()


# --- the core check: what would a restart find? ----------------------------------------------


def restart_problems(folder: Path, expect: dict[str, int]) -> list[str]:
    """What a restart would find wrong in `folder`. Every problem is one line; none: nothing lost.

    `expect` maps a pointer (last, best) to the newest update acknowledged for it before the
    fault (0: none yet). At once, with no repair: each pointer verifies (every file against
    its manifest) and names a checkpoint at least that new; every directory that looks
    committed (has a manifest) verifies. Then the start-up clean-up, which only deletes
    temporaries, must leave the pointers as they were; `last` must load (weights_only) with
    the part of history.jsonl it names, and the best update it remembers must be in `best`.
    """
    problems = []
    steps: dict[str, int] = {}
    for name, step in expect.items():
        if step == 0 and not pointer_exists(folder, name):
            continue  # never saved, never acknowledged: nothing to lose
        try:
            steps[name] = verify(folder / name)["step"]
        except CheckpointError as err:
            problems.append(f"{name} does not verify: {err}")
            continue
        if steps[name] < step:
            problems.append(f"{name} went back from update {step} to {steps[name]}")
    for checkpoint in committed(folder):
        try:
            verify(checkpoint)
        except CheckpointError as err:
            problems.append(f"{checkpoint.name} has a manifest but does not verify: {err}")
    targets = {name: pointed(folder, name) for name in steps}
    clean_start(folder)
    for name, target in targets.items():
        if pointed(folder, name) != target or target is None or not target.is_dir():
            problems.append(f"the start-up clean-up removed what {name} names")
    if LAST in steps and not problems:
        try:
            state, _ = load_checkpoint(folder / LAST)
            read_history(folder / HISTORY_LOG, state[keys.HISTORY])
        except CheckpointError as err:
            problems.append(f"{LAST} verifies but does not resume: {err}")
        else:
            # What the run resumes with must be true: the best it remembers is on disk.
            remembered = state[keys.CALLBACKS].get("checkpoint", {})  # none: saved by hand
            claimed = remembered.get("best_step") or 0
            if claimed and steps.get(BEST, 0) < claimed:
                problems.append(
                    f"{LAST} resumes believing update {claimed} is named by {BEST}, "
                    f"which names update {steps.get(BEST)}"
                )
    return problems


def trusted_wrongly(folder: Path) -> list[str]:
    """Checkpoints in `folder` that pass verify() but do not load: a digest that vouched for
    damage."""
    wrong = []
    for checkpoint in committed(folder):
        try:
            verify(checkpoint)
        except CheckpointError:
            continue  # refused: never trusted
        try:
            load_checkpoint(checkpoint)
        except CheckpointError as err:
            wrong.append(f"{checkpoint.name} verified but does not load: {err}")
    return wrong


def leftovers(folder: Path, keep: int) -> list[str]:
    """After a clean save: nothing temporary, every checkpoint whole, the pointers valid, and
    no more checkpoints than the newest `keep` and what the pointers name."""
    problems = [f"{name} left" for name in temporaries(folder)]
    for name in POINTERS:
        if pointer_exists(folder, name):
            try:
                verify(folder / name)
            except CheckpointError as err:
                problems.append(f"{name}: {err}")
    kept = committed(folder)
    spared = {pointed(folder, name) for name in POINTERS} - set(kept[-keep:])
    if len(kept) > keep + len(spared - {None}):
        problems.append(f"{len(kept)} checkpoints kept, not {keep} and what the pointers name")
    return problems


def listing(folder: Path) -> dict[str, Any]:
    """Every entry under `folder` with its bytes (or a symlink's target): to prove a command
    changed nothing."""
    found: dict[str, Any] = {}
    for path in sorted(folder.rglob("*")):
        if path.is_symlink():
            found[str(path.relative_to(folder))] = ("link", os.readlink(path))
        elif path.is_file():
            found[str(path.relative_to(folder))] = path.read_bytes()
    return found
