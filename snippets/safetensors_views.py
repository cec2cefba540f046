"""A two-element view of a 100,000-element tensor, saved by each format: bytes
on disk."""

from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

big = torch.arange(100_000, dtype=torch.float32)
view = big[:2]  # two numbers, but it points into big's 400,000-byte storage
assert view.untyped_storage().nbytes() == 400_000

torch.save(view, "view.pt")
# A clone owns a storage of exactly 8 bytes.
assert view.clone().untyped_storage().nbytes() == 8
torch.save(view.clone(), "clone.pt")
save_file({"x": view}, "view.safetensors")
save_file({"x": view.clone()}, "clone.safetensors")
# The four files.
size = {path.name: path.stat().st_size for path in Path(".").iterdir()}

# torch.save writes storages, so the view drags the whole 400,000 bytes
# along ...
assert size["view.pt"] > 400_000 > 100 * size["clone.pt"]
# ... the chapter's exact figures (the ZIP stores the stem of an ASCII file
# name in every entry name: a shorter stem, v.pt, gives another size, one of
# the same length, weiv.pt, the same)
assert (size["view.pt"], size["clone.pt"]) == (401_492, 1_563)
torch.save(view, "v.pt")
torch.save(view, "weiv.pt")
assert Path("v.pt").stat().st_size != size["view.pt"]
assert Path("weiv.pt").stat().st_size == size["view.pt"]
# ... and loads back as two numbers still sitting in a 100,000-element
# storage.
back = torch.load("view.pt")
assert torch.equal(back, view) and back.untyped_storage().nbytes() == 400_000
# safetensors writes the tensor's own bytes: the view's file is the clone's
# file, byte for byte.
assert (
    Path("view.safetensors").read_bytes()
    == Path("clone.safetensors").read_bytes()
)
assert size["view.safetensors"] < 100
assert torch.equal(load_file("view.safetensors")["x"], view)
# A view that skips elements is not contiguous: safetensors asks you to make it
# so first.
for strided in (
    big[::2],
    big.view(1000, 100).t(),
):  # every other one; a transpose
    assert not strided.is_contiguous()
    try:
        save_file({"x": strided}, "strided.safetensors")
        raise AssertionError("safetensors saved a non-contiguous view")
    except ValueError as err:
        assert "non contiguous" in str(err)
    save_file({"x": strided.contiguous()}, "strided.safetensors")

width = max(len(name) for name in size)
for name in ("view.pt", "clone.pt", "view.safetensors", "clone.safetensors"):
    print(f"{name:<{width}}  {size[name]:>7,} bytes")
print(
    f"torch.save of the view is {size['view.pt'] / size['clone.pt']:.0f}x "
    "its clone's file"
)
