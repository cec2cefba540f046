"""history.jsonl: the per-update records, appended to a log in the run folder
instead of being stored again in every checkpoint.

A checkpoint records only a mark: how many records and bytes of the log
belong to it, and their hash. A resume reads exactly that prefix, checks it,
and the next save cuts off whatever a killed run had appended after it, so the
log of a resumed run equals the uninterrupted run's.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from resume_lab.atomic import SaveError
from resume_lab.hashing import DEFAULT_HASH, Hasher, new_hasher
from resume_lab.loop import DETERMINISTIC_FIELDS
from resume_lab.manifest import CheckpointError
from resume_lab.run_files import HISTORY_LOG, TIMING_LOG

__all__ = [
    "HISTORY_LOG",
    "TIMING_LOG",
    "HistoryLog",
    "read_history",
    "read_timing",
]


def encode(record: dict[str, Any]) -> bytes:
    """Only the fields that are a pure function of the configuration: a
    resumed run writes the same bytes (wall-clock step_time is left out)."""
    logged = {field: record[field] for field in DETERMINISTIC_FIELDS}
    return (json.dumps(logged) + "\n").encode("utf8")


def encode_timing(record: dict[str, Any]) -> bytes:
    return (json.dumps(record["step_time"]) + "\n").encode("utf8")


class HistoryLog:
    """Appends records to `path`, keeping the count, size and running hash of
    what the file holds."""

    def __init__(self, path: Path, algorithm: str = DEFAULT_HASH) -> None:
        self.path = path
        self.timing_path = path.with_name(TIMING_LOG)
        self.algorithm = algorithm
        self.count = 0
        self.bytes = 0
        self._hasher: Hasher = new_hasher(algorithm)
        self._attached = False

    def _attach(self, history: list[dict[str, Any]]) -> None:
        """Keep the part of the file that equals `history`'s first records;
        cut off the rest (what a killed run appended after its last
        checkpoint)."""
        self.path.touch()
        with open(self.path, "rb") as f:
            for record in history:
                line = f.readline()
                if line != encode(record):
                    break
                self._hasher.update(line)
                self.count += 1
                self.bytes += len(line)
        os.truncate(self.path, self.bytes)
        self.timing_path.touch()
        with open(self.timing_path, "rb") as f:
            kept = sum(len(f.readline()) for _ in range(self.count))
        os.truncate(self.timing_path, kept)
        self._attached = True

    # --8<-- [start:sync]
    def sync(self, history: list[dict[str, Any]]) -> dict[str, Any]:
        """Append the records the file lacks, fsync, and return the mark a
        checkpoint stores."""
        if not self._attached:
            self._attach(history)
        records = history[self.count :]
        new = b"".join(encode(record) for record in records)
        try:
            with open(self.path, "ab") as f:
                f.write(new)
                f.flush()
                os.fsync(f.fileno())  # on disk before a checkpoint names it
            with open(self.timing_path, "ab") as f:
                f.writelines(encode_timing(record) for record in records)
        except OSError as err:
            with contextlib.suppress(OSError):  # leave the log as it was
                os.truncate(self.path, self.bytes)
            raise SaveError(self.path, err) from err
        self._hasher.update(new)
        self.count, self.bytes = len(history), self.bytes + len(new)
        return {
            "records": self.count,
            "bytes": self.bytes,
            "hash": self.algorithm,
            "digest": self._hasher.hexdigest(),
        }

    # --8<-- [end:sync]


# --8<-- [start:read_history]
def read_history(path: Path, mark: dict[str, Any]) -> list[dict[str, Any]]:
    """The records a checkpoint's mark vouches for: the first mark["bytes"]
    bytes of the log, checked against the mark's hash."""
    try:
        with open(path, "rb") as f:
            data = f.read(mark["bytes"])
    except FileNotFoundError:
        raise CheckpointError(
            f"{path}: missing; a checkpoint is resumed from its run folder, "
            "which holds the history log"
        ) from None
    hasher = new_hasher(mark["hash"])
    hasher.update(data)
    if len(data) != mark["bytes"] or hasher.hexdigest() != mark["digest"]:
        raise CheckpointError(
            f"{path}: expected its first {mark['bytes']} bytes to have "
            f"{mark['hash']} {mark['digest']}, found {len(data)} bytes with "
            f"{hasher.hexdigest()}; the log was damaged or cut short"
        )
    records = [json.loads(line) for line in data.splitlines()]
    if len(records) != mark["records"]:
        raise CheckpointError(
            f"{path}: expected {mark['records']} records, found {len(records)}"
        )
    times = read_timing(path.with_name(TIMING_LOG), len(records))
    return [
        {**record, "step_time": time}
        for record, time in zip(records, times, strict=True)
    ]


# --8<-- [end:read_history]


def read_timing(path: Path, count: int) -> list[float | None]:
    """Step times of the first `count` updates; None where a kill lost one
    (they are informative only, and never block a resume)."""
    times: list[float | None] = [None] * count
    if path.exists():
        with open(path, "rb") as f:
            for i, line in zip(range(count), f, strict=False):
                try:
                    times[i] = float(json.loads(line))
                except (ValueError, TypeError):
                    break
    return times
