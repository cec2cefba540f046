"""Read a torch.save file by hand: a ZIP archive whose tensor bytes start at
multiples of 64."""

import struct
import zipfile
from pathlib import Path

import torch

state = {
    "w": torch.arange(6, dtype=torch.float32).reshape(2, 3),
    "b": torch.tensor([1, 2], dtype=torch.int64),
}
torch.save(state, "model.pt")
raw = Path("model.pt").read_bytes()

# The 30 fixed bytes before each entry's name.
LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")
assert raw[:4] == b"PK\x03\x04"  # a ZIP file starts with a local file header

rows, contents = [], {}
with zipfile.ZipFile("model.pt") as archive:
    for entry in archive.infolist():
        fields = LOCAL_HEADER.unpack_from(raw, entry.header_offset)
        signature, method = fields[0], fields[3]
        name_len, extra_len = fields[9], fields[10]
        assert signature == b"PK\x03\x04"
        # Stored, not compressed: the bytes are as in memory.
        assert method == zipfile.ZIP_STORED
        start = entry.header_offset + LOCAL_HEADER.size + name_len + extra_len
        # The extra field holds only padding: a block tagged FB, its length,
        # then that many Z bytes.
        extra = raw[start - extra_len : start]
        assert extra[:2] == b"FB"
        assert struct.unpack("<H", extra[2:4]) == (extra_len - 4,)
        assert set(extra[4:]) <= {ord("Z")}
        data = raw[start : start + entry.file_size]
        # Our offset arithmetic finds the right bytes.
        assert data == archive.read(entry)
        # Every entry sits in a folder named after this file's stem.
        folder, _, name = entry.filename.partition("/")
        assert folder == "model"
        contents[name] = data
        rows.append((name, start, entry.file_size))

storages = {
    name: data for name, data in contents.items() if name.startswith("data/")
}
# One entry per storage, each starting on a 64-byte boundary (the extra field
# is the padding).
assert len(storages) == len(state)
assert all(
    start % 64 == 0 for name, start, _ in rows if name.startswith("data/")
)
assert (
    contents[".storage_alignment"] == b"64"
    and contents["byteorder"] == b"little"
)
# The storages are the tensors' raw bytes in this machine's order (as
# tobytes gives them), nothing added.
assert sorted(storages.values()) == sorted(
    t.numpy().tobytes() for t in state.values()
)
# data.pkl is a pickle: what it holds is rebuilt by code the unpickler is told
# to call.
assert (
    contents["data.pkl"].startswith(b"\x80\x02")
    and b"_rebuild_tensor" in contents["data.pkl"]
)

# The library agrees with the hand-made reading.
loaded = torch.load("model.pt")
assert all(torch.equal(loaded[k], state[k]) for k in state)

print(f"{'entry':<22} {'data at':>8} {'bytes':>6}  at % 64")
for name, start, size in rows:
    print(f"{name:<22} {start:>8} {size:>6}  {start % 64}")
print(
    f"file: {len(raw):,} bytes for "
    f"{sum(len(d) for d in storages.values())} bytes of tensors"
)
