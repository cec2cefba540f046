"""DCP on its own, overwriting a good checkpoint, when one of two ranks fails
before it writes its file; run on every rank that snippets/gloo_ranks.py
starts."""

import os
import warnings
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemWriter


class FailsOnRankOne(FileSystemWriter):
    """DCP's writer, except that rank 1 fails before writing anything, as a
    rank killed at that moment would."""

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
