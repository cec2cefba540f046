"""DCP on its own, overwriting a good checkpoint, when one of two ranks fails
before it writes its file (run on every rank that snippets/gloo_ranks.py
starts); and, in one process, a tensor with one bit flipped on disk."""

import os
import warnings
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemWriter


class FailsOnRankOne(FileSystemWriter):
    """DCP's writer, except that rank 1 fails before writing anything (an
    exception standing in for a kill)."""

    def write_data(self, plan: Any, planner: Any) -> Any:
        if dist.get_rank() == 1:
            raise OSError("rank 1 stopped before writing its file")
        return super().write_data(plan, planner)


def torn_overwrite(rank: int, world_size: int, folder: str) -> dict[str, Any]:
    warnings.simplefilter("ignore")  # "Detected an existing checkpoint ..."
    key = f"rank-{rank}"  # each rank's own tensor, in its own file
    dcp.save({key: torch.full((4,), 1.0)}, checkpoint_id=folder)  # good
    try:  # the same folder again, with new values: overwrite=True
        dcp.save(
            {key: torch.full((4,), 2.0)}, storage_writer=FailsOnRankOne(folder)
        )
        failed = None
    except BaseException as err:  # CheckpointException is a BaseException
        failed = type(err).__name__
    loaded = {key: torch.zeros(4)}
    dcp.load(loaded, checkpoint_id=folder)  # no error
    return {
        "failed": failed,
        "loaded": loaded[key],
        "files": os.listdir(folder),
    }


def flipped_bit(folder: str) -> tuple[torch.Tensor, torch.Tensor]:
    """One process: save a tensor with DCP, flip one bit of its bytes in the
    data file, load it back; returns (saved, loaded)."""
    warnings.simplefilter("ignore")  # no process group: one process
    saved = torch.full((4,), 3.0)
    dcp.save({"w": saved}, checkpoint_id=folder)
    path = next(Path(folder).glob("*.distcp"))
    raw = bytearray(path.read_bytes())
    at = raw.find(saved.numpy().tobytes())  # the tensor's bytes, as stored
    assert at >= 0
    raw[at] ^= 1  # the lowest bit of the first number
    path.write_bytes(raw)
    loaded = {"w": torch.zeros(4)}
    dcp.load(loaded, checkpoint_id=folder)  # no error
    return saved, loaded["w"]
