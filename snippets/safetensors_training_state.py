"""Split the lab's real checkpoint: weights to .safetensors, loop state to a
torch.save file.

Then put the two halves back together and check the result against the
original, bit for bit.
"""

from collections import OrderedDict
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from resume_lab import state_keys as keys
from resume_lab.build import build_trainer
from resume_lab.checkpoint import STATE_FILE, load_checkpoint, save_checkpoint
from resume_lab.config import LabConfig
from resume_lab.resume import resume, save_training


def leaves(obj, path=()):
    """(path, value) for every non-container value in nested dicts, lists and
    tuples."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield from leaves(value, (*path, key))
    elif isinstance(obj, list | tuple):
        for i, value in enumerate(obj):
            yield from leaves(value, (*path, i))
    else:
        yield path, obj


def bitwise_equal(a, b) -> bool:
    """Same keys, same types, tensors equal byte for byte (dtype and shape
    included)."""
    if isinstance(a, torch.Tensor):
        return (
            isinstance(b, torch.Tensor)
            and (a.dtype, a.shape) == (b.dtype, b.shape)
            and (
                a.reshape(-1)
                .view(torch.uint8)
                .equal(b.reshape(-1).view(torch.uint8))
            )
        )
    if isinstance(a, dict):
        return (
            type(a) is type(b)
            and a.keys() == b.keys()
            and all(bitwise_equal(a[k], b[k]) for k in a)
        )
    if isinstance(a, list | tuple):
        return (
            type(a) is type(b)
            and len(a) == len(b)
            and all(map(bitwise_equal, a, b))
        )
    return type(a) is type(b) and a == b


# A real checkpoint: the lab trains 5 updates and saves the way it always does.
trainer = build_trainer(LabConfig(steps=12), init_seed=0)
trainer.fit(5)
checkpoint = save_training(trainer, "run")
# Every file's hash checked, then weights_only=True.
state, manifest = load_checkpoint(checkpoint)

# What safetensors cannot hold: every part of the loop state has values that
# are not tensors.
not_tensors = {}
for path, value in leaves(state):
    if not isinstance(value, torch.Tensor):
        not_tensors.setdefault(path[0], []).append(type(value).__name__)
for part in (
    keys.OPTIMIZER,
    keys.SCHEDULER,
    keys.RNG,
    keys.DATA_POSITION,
    keys.CALLBACKS,
):
    assert not_tensors[part], part
# The weights alone are a flat dict of tensors.
assert keys.MODEL not in not_tensors
try:
    save_file(state, "everything.safetensors")
    raise AssertionError("safetensors accepted a nested training state")
except ValueError as err:
    assert "expected torch.Tensor" in str(err)

# The split: weights to safetensors (with string metadata), everything else to
# torch.save.
save_file(
    dict(state[keys.MODEL]),
    "model.safetensors",
    metadata={"step": str(state[keys.STEP]), "format": str(state[keys.FORMAT])},
)
torch.save({k: v for k, v in state.items() if k != keys.MODEL}, "loop.pt")

# Back: the loop state loads under the restricted unpickler with nothing
# allowlisted (torch's own modules allowlist a few classes when imported, so
# the list is emptied first, then put back), the weights from safetensors.
allowed = torch.serialization.get_safe_globals()
torch.serialization.clear_safe_globals()
back = torch.load("loop.pt", weights_only=True)
torch.serialization.add_safe_globals(allowed)
weights = load_file("model.safetensors")
back[keys.MODEL] = OrderedDict(
    (name, weights[name]) for name in state[keys.MODEL]
)
back = {k: back[k] for k in state}  # the original key order
assert bitwise_equal(back, state)
with safe_open("model.safetensors", framework="pt") as f:
    assert f.metadata()["step"] == str(manifest["step"]) == "5"

# And the reassembled state resumes: a new trainer (another init seed) finishes
# the run with the same bits as the trainer that was never interrupted.
trainer.fit(12)
save_checkpoint(
    {STATE_FILE: back},
    "run",
    "reassembled",
    step=back[keys.STEP],
    config=back[keys.CONFIG],
)
resumed = build_trainer(LabConfig(steps=12), init_seed=1)
resume(resumed, "run/reassembled")
resumed.fit(12)
assert bitwise_equal(resumed.model.state_dict(), trainer.model.state_dict())

# The weights file alone is enough to rebuild the model for inference.
fresh = build_trainer(LabConfig(steps=12), init_seed=1).model
fresh.load_state_dict(load_file("model.safetensors"))
assert bitwise_equal(fresh.state_dict(), state[keys.MODEL])

size = {
    name: Path(name).stat().st_size
    for name in ("run/last/state.pt", "model.safetensors", "loop.pt")
}
print(
    f"state.pt           {size['run/last/state.pt']:>7,} bytes: "
    "the lab's checkpoint at update 5"
)
print(
    f"model.safetensors  {size['model.safetensors']:>7,} bytes: "
    f"{len(weights)} weight tensors"
)
print(
    f"loop.pt            {size['loop.pt']:>7,} bytes: "
    "everything else, weights_only=True"
)
print("parts with values that are not tensors:")
for part, kinds in not_tensors.items():
    counts = {kind: kinds.count(kind) for kind in sorted(set(kinds))}
    print(
        f"  {part:<14} "
        + ", ".join(f"{n} {kind}" for kind, n in counts.items())
    )
print("reassembled == original, bit for bit:", bitwise_equal(back, state))
print(
    "resumed from the reassembled state, update 12 weights == "
    "uninterrupted run's:",
    bitwise_equal(resumed.model.state_dict(), trainer.model.state_dict()),
)
