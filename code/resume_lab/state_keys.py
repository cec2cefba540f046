"""The names of everything a checkpoint holds, as constants (torchtune style).

A typo in a string key is a silent bug: the state is saved under one name and looked for under
another. Every module that writes or reads a checkpoint imports these names instead.
"""

# --8<-- [start:state_keys]
FORMAT = "format"  # int: the layout of this dict, bumped when a key changes meaning
FORMAT_VERSION = 1

STEP = "step"  # updates done (optimizer.step() calls): the clock cadences count
MODEL = "model"  # model.state_dict()
OPTIMIZER = "optimizer"  # AdamW moments and step counts
SCHEDULER = "scheduler"  # LambdaLR position; the lambda itself is rebuilt from CONFIG
SCALER = "scaler"  # AMP GradScaler state; None here (CPU, float32), the slot is kept on purpose
SAMPLER = "sampler"  # {"seed", ...}: data order is derived from this, never from a CLI seed
DATA_POSITION = "data_position"  # {"epoch", "micro", "examples_seen"}: where the next batch starts
RNG = "rng"  # torch, Python and NumPy generator states (see rng.py)
CALLBACKS = "callbacks"  # {callback name: its state_dict()}: early stopping, checkpoint schedule
HISTORY = "history"  # list of per-update records
CONFIG = "config"  # LabConfig.to_dict(): a resumed run must be the same experiment
VERSIONS = "versions"  # torch / numpy / python versions that wrote the file
# --8<-- [end:state_keys]

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
