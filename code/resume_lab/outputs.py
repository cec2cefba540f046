"""The files a finished run leaves: final.pt, history.json, timing.json."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from resume_lab.atomic import atomic_save, atomic_write_bytes
from resume_lab.hashing import DEFAULT_HASH
from resume_lab.loop import DETERMINISTIC_FIELDS, Trainer
from resume_lab.manifest import make_manifest, manifest_of, manifest_text
from resume_lab.run_files import FINAL, HISTORY, TIMING


def history_records(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The reproducible part of each record.

    Wall-clock step_time goes to timing.json instead, so that history.json of a
    resumed run is byte-identical to an uninterrupted run's."""
    return [
        {field: record[field] for field in DETERMINISTIC_FIELDS}
        for record in history
    ]


def save_file_checkpoint(
    obj: Any,
    path: str | os.PathLike[str],
    *,
    step: int,
    config: dict[str, Any],
    algorithm: str = DEFAULT_HASH,
) -> dict[str, Any]:
    """A single file (final.pt) with its manifest beside it (final.json), for
    tools that want one file; written once, when a run ends."""
    path = Path(path)
    digest = atomic_save(obj, path, algorithm)
    manifest = make_manifest(
        {path.name: digest}, step=step, config=config, algorithm=algorithm
    )
    atomic_write_bytes(manifest_of(path), manifest_text(manifest))
    return manifest


def write_json(path: Path, value: Any) -> None:
    atomic_write_bytes(
        path, (json.dumps(value, indent=1) + "\n").encode("utf8")
    )


def write_final(
    trainer: Trainer,
    folder: str | os.PathLike[str],
    weights: dict[str, Any] | None = None,
) -> Path:
    """final.pt (a flat dict of tensors, with final.json beside it),
    history.json, timing.json. `weights` defaults to the model's
    state_dict (a sharded run passes the gathered, unsharded one)."""
    folder = Path(folder)
    # plain dict: any tensor-dict reader can take it
    weights = dict(trainer.model.state_dict() if weights is None else weights)
    save_file_checkpoint(
        weights,
        folder / FINAL,
        step=trainer.step,
        config=trainer.config.to_dict(),
    )
    write_json(folder / HISTORY, history_records(trainer.history))
    write_json(
        folder / TIMING,
        [
            {"step": r["step"], "step_time": r["step_time"]}
            for r in trainer.history
        ],
    )
    return folder / FINAL


def read_history(folder: str | os.PathLike[str]) -> list[dict[str, Any]]:
    return json.loads((Path(folder) / HISTORY).read_text("utf8"))
