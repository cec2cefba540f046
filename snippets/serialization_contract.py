"""The serialization contract in one file: storages are shared and saved whole,
and the default load refuses classes it was not told about. Worth keeping in a
project's own test suite: it fails the day a torch upgrade changes any of it."""

import argparse
import os
import pickle

import torch
from torch.serialization import (
    get_safe_globals,
    get_unsafe_globals_in_checkpoint,
    safe_globals,
)

# 1. A tensor and its view come back as two views of one storage.
base = torch.linspace(0, 1, 8)
torch.save({"base": base, "middle": base[3:6]}, "pair.pt")
pair = torch.load("pair.pt")
same_storage = (
    pair["middle"].untyped_storage().data_ptr()
    == pair["base"].untyped_storage().data_ptr()
)
assert same_storage and pair["middle"].storage_offset() == 3
pair["middle"][0] = 42.0
assert pair["base"][3].item() == 42.0

# 2. ...so a small view drags its whole storage into the file, and a clone
# does not.
big = torch.ones(50_000)
torch.save(big[:4], "head_view.pt")
torch.save(big[:4].clone(), "head_copy.pt")
view_size = os.path.getsize("head_view.pt")
copy_size = os.path.getsize("head_copy.pt")
assert view_size > big.numel() * 4 and view_size > 50 * copy_size

# 3. The default load (weights_only=True) refuses a class nobody allowlisted...
torch.save(
    {"w": torch.zeros(2), "cfg": argparse.Namespace(lr=0.01, layers=2)},
    "legacy.pt",
)
try:
    torch.load("legacy.pt")
except pickle.UnpicklingError as err:
    assert "Unsupported global: GLOBAL argparse.Namespace" in str(err)
else:
    raise AssertionError("the restricted unpickler built an argparse.Namespace")
assert get_unsafe_globals_in_checkpoint("legacy.pt") == ["argparse.Namespace"]

# ...loads it inside a scope that names exactly that class, and refuses it
# again afterwards.
with safe_globals([argparse.Namespace]):
    legacy = torch.load("legacy.pt")
assert legacy["cfg"] == argparse.Namespace(lr=0.01, layers=2)
assert argparse.Namespace not in get_safe_globals()
try:
    torch.load("legacy.pt")
except pickle.UnpicklingError:
    pass
else:
    raise AssertionError("argparse.Namespace still loads after the scope")

print(
    f"view shares storage (offset {pair['middle'].storage_offset()}); "
    f"4-element view {view_size:,} B vs clone {copy_size:,} B; "
    f"Namespace loads only inside safe_globals"
)
