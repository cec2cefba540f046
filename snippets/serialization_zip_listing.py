"""Open a torch.save file as the ZIP archive it is, and check every
entry in it."""

import io
import pickle
import pickletools
import struct
import sys
import zipfile
from pathlib import Path

import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Linear(3, 2)  # two storages: weight (6 floats) and bias (2 floats)
torch.save({"model": model.state_dict(), "step": 7}, "tiny.pt")
raw = Path("tiny.pt").read_bytes()


def payload_start(info: zipfile.ZipInfo) -> int:
    """Where an entry's bytes begin: after its 30-byte local header, its name
    and its extra field.

    The central directory's extra field (empty here) differs from the local
    one (torch pads the local one to align the data: a block tagged FB, its
    length, then that many Z bytes), so read the lengths from the local header
    itself.
    """
    signature, name_len, extra_len = struct.unpack_from(
        "<4s22xHH", raw, info.header_offset
    )
    assert signature == b"PK\x03\x04"
    start = info.header_offset + 30 + name_len + extra_len
    local_extra = raw[start - extra_len : start]
    padding = extra_len - 4
    assert local_extra == b"FB" + struct.pack("<H", padding) + b"Z" * padding
    assert info.extra == b""  # the central directory's: empty
    return start


with zipfile.ZipFile("tiny.pt") as archive:
    infos = archive.infolist()
    contents = {info.filename: archive.read(info) for info in infos}


def folders(file: str | io.BytesIO) -> set[str]:
    with zipfile.ZipFile(file) as archive:
        return {name.split("/", 1)[0] for name in archive.namelist()}


# Saved to a path with an ASCII name, every entry sits in one folder named
# after the file's stem: tiny/data.pkl, tiny/data/0, ...
assert {name.split("/", 1)[0] for name in contents} == {"tiny"}
for path in ("a.b.pt", "noext", "view.bin"):
    torch.save({"step": 7}, path)
    assert folders(path) == {Path(path).stem}
# Saved to a file object, or to a path with a non-ASCII name (torch writes
# that one through a Python file object), in archive/.
buffer = io.BytesIO()
torch.save({"model": model.state_dict(), "step": 7}, buffer)
torch.save({"step": 7}, "état.pt")
assert folders(buffer) == folders("état.pt") == {"archive"}
entries = {name.split("/", 1)[1]: data for name, data in contents.items()}
assert set(entries) == {
    # the pickled object, with every storage replaced by a reference
    "data.pkl",
    ".format_version",
    ".storage_alignment",
    "byteorder",
    "data/0",  # one entry per storage
    "data/1",
    "version",
    ".data/serialization_id",
}
format_version = entries[".format_version"].decode()
alignment = entries[".storage_alignment"].decode()
version = entries["version"].strip().decode()
assert (version, format_version, alignment) == ("3", "1", "64")
assert entries["byteorder"].decode() == sys.byteorder == "little"

# The same data saved again, under another name, gets the same id; another
# model's state, another id.
serialization_id = entries[".data/serialization_id"]
assert serialization_id.isdigit()
torch.save({"model": model.state_dict(), "step": 7}, "again.pt")
torch.save({"model": nn.Linear(3, 2).state_dict(), "step": 7}, "other.pt")
with zipfile.ZipFile("again.pt") as again, zipfile.ZipFile("other.pt") as other:
    assert again.read("again/.data/serialization_id") == serialization_id
    assert other.read("other/.data/serialization_id") != serialization_id

# Stored, not compressed: every entry's bytes appear verbatim in the file.
assert all(info.compress_type == zipfile.ZIP_STORED for info in infos)
for info in infos:
    start = payload_start(info)
    assert raw[start : start + info.file_size] == contents[info.filename]

# Each storage payload starts on a 64-byte boundary and is the tensor's raw
# bytes.
storages = [info for info in infos if "/data/" in info.filename]
assert all(payload_start(info) % int(alignment) == 0 for info in storages)
assert entries["data/0"] == model.weight.detach().numpy().tobytes()
assert entries["data/1"] == model.bias.detach().numpy().tobytes()

# data.pkl holds no tensor data, only one persistent reference per storage,
# read back by a BINPERSID opcode.
ops = list(pickletools.genops(entries["data.pkl"]))
assert sum(op.name == "BINPERSID" for op, _, _ in ops) == len(storages)


class References(pickle.Unpickler):
    """Unpickles data.pkl with each tensor replaced by its storage's
    reference."""

    def persistent_load(self, reference: tuple) -> tuple:
        return reference

    def find_class(self, module: str, name: str) -> object:
        if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
            return lambda reference, *view: reference
        return super().find_class(module, name)


refs = References(io.BytesIO(entries["data.pkl"])).load()["model"]
# ('storage', its type, its key, the device it was on, its length in elements)
assert refs["weight"] == ("storage", torch.FloatStorage, "0", "cpu", 6)
assert refs["bias"] == ("storage", torch.FloatStorage, "1", "cpu", 2)
# ZIP64: the end-of-central-directory record (its last 22 bytes, no comment)
# follows a ZIP64 locator, which holds the offset of a ZIP64
# end-of-central-directory record.
assert raw[-22:-18] == b"PK\x05\x06" and raw[-42:-38] == b"PK\x06\x07"
(zip64_end,) = struct.unpack_from("<Q", raw, len(raw) - 42 + 8)
assert raw[zip64_end : zip64_end + 4] == b"PK\x06\x06"

print(f"{'entry':<28}{'bytes':>6}{'data at':>9}{'% 64':>6}  content")
for info in infos:
    start, data = payload_start(info), contents[info.filename]
    shown = (
        repr(data.strip().decode())
        if len(data) <= 40 and data.isascii()
        else ""
    )
    print(
        f"{info.filename:<28}{info.file_size:>6}{start:>9}"
        f"{start % 64:>6}  {shown}"
    )
