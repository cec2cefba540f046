"""The resume lab: train, interrupt, resume, and prove the resume bitwise exact.

Modules, one job each:

- config: LabConfig, every setting that changes the trajectory
- data, model, sampler, schedule: the blobs, the MLP, the (seed, epoch)
  sampler, warmup + cosine
- loop: the Trainer (one readable loop, named events); callbacks: early
  stopping, checkpoints, stop conditions; evaluate: evaluation that consumes
  no training RNG
- rng, state_keys, checkpoint, resume: what a checkpoint holds, how it is
  written (atomic, hashed, with a manifest), verified before unpickling, and
  put back in order
- build, outputs, signals, progress, experiment, cli: wiring, files, SIGTERM,
  the demo
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("resume-lab")
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"

from resume_lab.build import build_trainer
from resume_lab.checkpoint import (
    CheckpointError,
    atomic_save,
    load_checkpoint,
    save_checkpoint,
    verify,
)
from resume_lab.config import LabConfig
from resume_lab.resume import resume, save_training

__all__ = [
    "CheckpointError",
    "LabConfig",
    "__version__",
    "atomic_save",
    "build_trainer",
    "load_checkpoint",
    "resume",
    "save_checkpoint",
    "save_training",
    "verify",
]
