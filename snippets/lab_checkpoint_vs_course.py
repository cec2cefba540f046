"""The lab's state.pt beside the 2.8 text's 88,341-byte file: what remains
without the lab's bookkeeping keys and with Python's RNG words as a tuple."""

import io
import itertools
import random

import torch

from resume_lab import state_keys as keys
from resume_lab.build import build_trainer
from resume_lab.checkpoint import STATE_FILE, load_checkpoint
from resume_lab.compare import checkpoint_bytes
from resume_lab.config import LabConfig
from resume_lab.resume import save_training

torch.set_num_threads(1)
KILL_AT = 50  # where the demo stops run B with its default configuration

# The 2.8 text's run (same model, same stopping point): its file and the parts
# it named.
COURSE = {
    "total": 88_341,
    "parameters": 22_032,
    "optimizer_moments": 44_064,
    "rng_torch": 5_056,
    "rng_numpy": 4_992,
}

trainer = build_trainer(LabConfig(), init_seed=0)
trainer.fit(KILL_AT)
checkpoint = save_training(trainer, "run")
ours = checkpoint_bytes(checkpoint)

# The four big parts have exactly the sizes the 2.8 run reported ...
for part in ("parameters", "optimizer_moments", "rng_torch", "rng_numpy"):
    assert ours[part] == COURSE[part], (part, ours[part])
course_rest = COURSE["total"] - sum(
    v for part, v in COURSE.items() if part != "total"
)
# Its "about 12 KB": Python RNG state, counters, ZIP headers.
assert course_rest == 12_197


# ... and the rest is what the lab stores beyond the parts the 2.8 text named:
# take it off, one layer at a time, and see what is left.
def saved_size(state: dict) -> int:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return len(buffer.getvalue())


def drop_bookkeeping(state: dict) -> None:
    for key in (
        keys.CONFIG,
        keys.VERSIONS,
        keys.CALLBACKS,
        keys.SAMPLER,
        keys.FORMAT,
        keys.HISTORY,
    ):
        del state[key]


def python_rng_as_tuple(state: dict) -> None:
    # 625 pickled ints instead of an int64 tensor.
    state[keys.RNG]["python"] = random.getstate()


state, _ = load_checkpoint(checkpoint)
# The history is not in the checkpoint: only a mark of the log (its length and
# hash).
assert set(state[keys.HISTORY]) == {"records", "bytes", "hash", "digest"}
assert state[keys.HISTORY]["records"] == KILL_AT
assert len((checkpoint.parent / "history.jsonl").read_text().splitlines()) == 50
sizes = [("the lab's state.pt", saved_size(state))]
assert sizes[0][1] == (checkpoint / STATE_FILE).stat().st_size
# Bigger than the 2.8 file, by less than 3 %.
assert COURSE["total"] < sizes[0][1] < 1.03 * COURSE["total"]
for label, strip in [
    (
        "- CONFIG, VERSIONS, CALLBACKS, SAMPLER, FORMAT, HISTORY",
        drop_bookkeeping,
    ),
    ("- Python RNG words as a tensor (tuple instead)", python_rng_as_tuple),
]:
    strip(state)
    sizes.append((label, saved_size(state)))

savings = [
    before - after for (_, before), (_, after) in itertools.pairwise(sizes)
]
assert all(s > 0 for s in savings)
lean = sizes[-1][1]
# What is left: within 1 %.
assert abs(lean - COURSE["total"]) < 0.01 * COURSE["total"]

print(f"{'':48} {'bytes':>7} {'change':>7}")
for (label, size), (_, before) in zip(
    sizes, [(None, None), *sizes[:-1]], strict=True
):
    change = "" if before is None else f"{size - before:+,}"
    print(f"{label:48} {size:7,} {change:>7}")
print(f"{'the 2.8 text':48} {COURSE['total']:7,} {COURSE['total'] - lean:+7,}")
