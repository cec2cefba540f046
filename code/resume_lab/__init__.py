"""The resume lab: train, interrupt, resume, and prove the resume bitwise exact.

Modules, one job each, from the loop outwards:

- training: config (LabConfig, every setting that changes the trajectory);
  data, model, sampler, schedule (the blobs, the MLP, the (seed, epoch)
  sampler, warmup + cosine); evaluate (no training RNG consumed); clocks
  (updates, data position, examples seen: one stateful object); rng (the
  process's generators); events (the five events, the Callback base, stop
  reasons: a leaf); loop (the Trainer: one readable loop); callbacks (early
  stopping, the one Checkpoint saver, stop conditions); signals (SIGTERM and
  SIGINT as a stop condition); progress; build (build_trainer, any world)
- what a checkpoint holds and how it is put back: state_keys; resume
  (training_state, start_save, save_training, resume: one order, the RNG
  last); state_file (what both stores share: Store, Saved)
- how it is stored: hashing (hash while writing), atomic (write, fsync,
  rename), manifest (every file's size and hash, sealed), checkpoint (the
  one commit: a directory and one rename; verify, load_checkpoint);
  file_store (one process: state.pt) and dcp_store (logical shards: DCP's
  pieces and train_state.pt); safe_metadata (DCP's .metadata through an
  allow-list); run_files (every name in a run folder); run_folder (the
  last/best pointers, start-up clean-up, rotation); history_log
  (history.jsonl beside the checkpoints); outputs (final.pt, history.json)
- scaling out: world (the process group, or a world of one); shards
  (logical shards own data slices and dropout generators); reduction (the
  shard-ordered sum); engines (DDP, FSDP2, none); sharded (ShardedTrainer:
  only accumulate and agree differ)
- running it: session (train_in_folder, the one behind `train`); cli and
  parser (the command line), exit_codes, versions, __main__; launcher (one
  process or torchrun, under a timeout, every worker killed with it);
  experiment and distributed_demo (the demos); compare (what they compare)
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
