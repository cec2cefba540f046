"""Saving a two-element view writes the whole storage behind it; a clone writes
two floats."""

import os

import torch

big = torch.zeros(100_000)  # float32: 400,000 bytes of storage
view, copy = big[:2], big[:2].clone()
view_storage = view.untyped_storage().nbytes()
clone_storage = copy.untyped_storage().nbytes()
assert view_storage == 400_000
assert clone_storage == 8

# The archive's folder is named after the file's stem, so a stem of another
# length gives another size (the extension does not count): these are the
# names the 2.8 text used.
torch.save(view, "view.pt")
torch.save(copy, "clone.pt")
view_bytes = os.path.getsize("view.pt")
clone_bytes = os.path.getsize("clone.pt")
for path in ("weiv.pt", "view.bin", "view"):
    torch.save(view, path)
    assert os.path.getsize(path) == view_bytes
sizes = []
for length in range(1, 9):  # stems v, vv, ..., vvvvvvvv
    torch.save(view, "v" * length + ".pt")
    sizes.append(os.path.getsize("v" * length + ".pt"))
assert sizes == sorted(set(sizes))  # each length its own size, longer larger

# The whole storage, plus the headers.
assert view_bytes > big.numel() * big.element_size()
assert clone_bytes < 2_000
assert view_bytes > 200 * clone_bytes
# The same byte counts as the chapter measured on torch 2.8.
assert (view_bytes, clone_bytes) == (401_492, 1_563)

print(f"big[:2]         -> view.pt  {view_bytes:>9,} bytes")
print(f"big[:2].clone() -> clone.pt {clone_bytes:>9,} bytes")
print(f"ratio {view_bytes / clone_bytes:.0f}x for the same two numbers")
