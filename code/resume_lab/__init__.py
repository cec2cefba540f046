"""The resume lab: train, interrupt, resume, and prove the resume bitwise exact.

Modules, one job each:

- config: LabConfig, every setting that changes the trajectory
- data, model, sampler, schedule: the blobs, the MLP, the (seed, epoch)
  sampler, warmup + cosine
- loop: the Trainer (one readable loop, named events); callbacks: early
  stopping, checkpoints, stop conditions; evaluate: evaluation that consumes
  no training RNG
- rng, state_keys, resume: what a checkpoint holds and the order in which
  a resume puts it back
- hashing, atomic, checkpoint, run_folder, history_log: how it is stored:
  hashed while written, a directory committed by one rename with its
  manifest, verified before unpickling; the last/best pointers, start-up
  clean-up and rotation; the per-update log beside the checkpoints
- build, outputs, signals, progress, experiment, cli: wiring, files, SIGTERM,
  the demo
"""

from resume_lab.atomic import atomic_save
from resume_lab.build import build_trainer
from resume_lab.checkpoint import (
    CheckpointError,
    load_checkpoint,
    save_checkpoint,
    verify,
)
from resume_lab.config import LabConfig
from resume_lab.resume import resume, save_training
from resume_lab.versions import LAB_VERSION as __version__

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
