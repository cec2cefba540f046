"""The names of everything a checkpoint holds, as constants (torchtune style).

A typo in a string key is a silent bug: the state is saved under one name and
looked for under another. Every module that writes or reads a checkpoint
imports these names instead.
"""

# --8<-- [start:state_keys]
# int: the layout of this dict, bumped when a key changes meaning
FORMAT = "format"
FORMAT_VERSION = 1

STEP = "step"  # updates done (optimizer.step() calls): the clock cadences count
MODEL = "model"  # model.state_dict()
OPTIMIZER = "optimizer"  # AdamW moments and step counts
# LambdaLR position; the lambda itself is rebuilt from CONFIG
SCHEDULER = "scheduler"
# AMP GradScaler state; None here (CPU, float32), the slot is kept on purpose
SCALER = "scaler"
# {"seed", ...}: a resumed run's data order comes from this, never from the
# seed its new process was started with
SAMPLER = "sampler"
# {"epoch", "micro", "examples_seen"}: where the next batch starts
DATA_POSITION = "data_position"
RNG = "rng"  # torch, Python and NumPy generator states (see rng.py)
# {callback name: its state_dict()}: early stopping, checkpoint schedule
CALLBACKS = "callbacks"
# how much of history.jsonl this checkpoint covers, {"records", "bytes", "hash",
# "digest"}: the records themselves stay in the log
HISTORY = "history"
# LabConfig.to_dict(): a resumed run must be the same experiment
CONFIG = "config"
VERSIONS = "versions"  # torch / numpy / python versions that wrote the file
# --8<-- [end:state_keys]

# On L logical shards (W processes, or one), what differs: L itself, one
# dropout generator per shard (under per-shard keys, with the tensors), and
# the optimizer's settings apart from its tensors.
SHARDS = "shards"
SHARD_RNG = "shard_rng"
OPTIMIZER_GROUPS = "optimizer_groups"

ALL = (
    FORMAT,
    STEP,
    MODEL,
    OPTIMIZER,
    SCHEDULER,
    SCALER,
    SAMPLER,
    DATA_POSITION,
    RNG,
    CALLBACKS,
    HISTORY,
    CONFIG,
    VERSIONS,
)
