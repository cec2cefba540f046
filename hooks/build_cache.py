"""What the build computed, kept by everything it was computed from, so it is computed once.

Some facts take seconds to compute: a fence's figures (`{{ fence.ID.NAME }}`; three of those
fences start gloo ranks), what a snippet prints (`{{ output.NAME }}`), the lab's demo and its
loss curves (`{{ lab.* }}`). Each is stored in the environment that computed it,
`.venv/build-cache/` (or $BUILD_CACHE; like mypy's cache, it goes with the set-up, and the
repository's tree stays clean), by a key, a SHA-256 of:

- the code that computes it (the fence's parts, the snippet), and every file of the repository
  that code imports, at any depth (page_fences/inputs.py);
- the code that runs it (page_fences' runner, this module, the caller);
- the installed versions, the Python, the machine's architecture and core count, and the
  thread settings of the environment.

Any change to any of them is another key: a figure on a page is always the one its inputs give
now, computed, never typed, and an entry is never updated in place. While a value is computed,
the files of the repository it opens are recorded and checked again before the entry is used;
and if it starts a process (which may read any file), the entry also holds a hash of all the
repository's code and is used only while that hash still matches.

`BUILD_CACHE=off` computes everything (a cold build); `make clean` empties the cache.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import importlib.metadata
import json
import os
import platform
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from page_fences import inputs

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = "build-cache 1"
# The runner every cached value is computed through.
RUNNER = [ROOT / "page_fences" / n for n in ("run.py", "includes.py", "isolation.py")]
PACKAGES = ("torch", "numpy", "safetensors", "blake3", "matplotlib")
THREAD_SETTINGS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "PYTHONHASHSEED")
# Events after which a value may depend on any file: a process of its own was started.
SPAWNS = {"subprocess.Popen", "os.fork", "os.forkpty", "os.posix_spawn", "os.exec", "os.spawn"}


def folder() -> Path | None:
    """Where entries go: $BUILD_CACHE, else the virtual environment's build-cache/ folder
    (outside one, build/cache/); None when BUILD_CACHE=off."""
    chosen = os.environ.get("BUILD_CACHE")
    if chosen == "off":
        return None
    if chosen:
        return Path(chosen)
    if sys.prefix != sys.base_prefix:
        return Path(sys.prefix) / "build-cache"
    return ROOT / "build" / "cache"


@cache  # what is installed does not change while the build runs
def environment() -> str:
    def version(package: str) -> str:
        try:
            return importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            return "-"

    described = [sys.version, platform.machine(), str(os.cpu_count())]
    described += [f"{p}={version(p)}" for p in PACKAGES]
    described += [f"{n}={os.environ.get(n, '')}" for n in THREAD_SETTINGS]
    return "\n".join(described)


_digests: dict[tuple[Path, int, int], str] = {}


def digest(path: Path) -> str:
    """The file's SHA-256, read again only when its size or modification time changed."""
    status = path.stat()
    stamp = (path, status.st_mtime_ns, status.st_size)
    if stamp not in _digests:
        _digests[stamp] = hashlib.sha256(path.read_bytes()).hexdigest()
    return _digests[stamp]


def relative(path: Path) -> str:
    return str(path.resolve().relative_to(ROOT))


def key(kind: str, sources: list[tuple[str, str]], callers: Iterable[Path] = ()) -> str:
    """The key of a value of `kind` computed from `sources`, (filename, code) pairs."""
    files = inputs.repository_files(sources, ROOT) | {p.resolve() for p in [*RUNNER, *callers]}
    files.add(Path(__file__).resolve())
    h = hashlib.sha256(f"{SCHEMA}\n{kind}\n{environment()}\n".encode())
    for filename, code in sources:
        h.update(f"source {name_of(filename)}\n{code}\n".encode())
    for path in sorted(files):
        h.update(f"file {relative(path)} {digest(path)}\n".encode())
    return h.hexdigest()


def name_of(filename: str) -> str:
    path = Path(filename).resolve()
    return relative(path) if path.is_relative_to(ROOT) else filename


def all_code() -> str:
    """A hash of every Python file of the repository."""
    h = hashlib.sha256()
    for path in inputs.python_files(ROOT):
        h.update(f"{relative(path)} {digest(path)}\n".encode())
    return h.hexdigest()


@dataclass
class Observed:
    opened: set[Path] = field(default_factory=set)
    spawned: bool = False


_observing: list[Observed] = []
_hooked = False


def _audit(event: str, args: tuple) -> None:
    if not _observing:
        return
    if event == "open" and isinstance(args[0], str | bytes):
        path = Path(os.path.abspath(os.fsdecode(args[0])))
        if inputs.ours(path, ROOT) and path.is_file():
            for seen in _observing:
                seen.opened.add(path)
    elif event in SPAWNS:
        for seen in _observing:
            seen.spawned = True


@contextlib.contextmanager
def observed() -> Iterator[Observed]:
    """Record the repository's files opened, and any process started, while inside."""
    global _hooked
    if not _hooked:
        sys.addaudithook(_audit)  # an audit hook stays for the process; it is idle outside
        _hooked = True
    seen = Observed()
    _observing.append(seen)
    try:
        yield seen
    finally:
        _observing.pop()


def entry_path(kind: str, name: str) -> Path | None:
    base = folder()
    return None if base is None else base / kind / f"{name}.json"


def valid(entry: dict) -> bool:
    for name, sha in entry["opened"].items():
        path = ROOT / name
        if not path.is_file() or digest(path) != sha:
            return False
    return entry.get("all_code") is None or entry["all_code"] == all_code()


_held: dict[tuple[str, str], Any] = {}  # this process's values, by kind and key


def new_build() -> None:
    """Forget what this process found for the last build (`mkdocs serve` builds again)."""
    _held.clear()
    inputs.forget()


def cached(kind: str, name: str, compute: Callable[[], Any], what: str = "") -> Any:
    """The value stored under `name` (a key()), else compute() it, store it and return it.
    A value is bytes, or JSON that reads back equal to it (anything else is not stored);
    `what` names it in the entry, for whoever reads the cache."""
    if (kind, name) in _held:
        return _held[kind, name]
    path = entry_path(kind, name)
    if path is not None and path.is_file():
        entry = json.loads(path.read_text("utf8"))
        if valid(entry):
            _held[kind, name] = decode(entry["value"])
            return _held[kind, name]
    with observed() as seen:
        value = compute()
    stored = encode(value)
    if path is not None and decode(json.loads(json.dumps(stored))) == value:
        entry = {
            "what": f"{kind} {what}".strip(),
            "value": stored,
            "opened": {relative(p): digest(p) for p in sorted(seen.opened)},
            "all_code": all_code() if seen.spawned else None,
        }
        write_atomically(path, json.dumps(entry, sort_keys=True))
    _held[kind, name] = value
    return value


def encode(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"bytes": base64.b64encode(value).decode()}
    return {"json": value}


def decode(stored: dict) -> Any:
    return base64.b64decode(stored["bytes"]) if "bytes" in stored else stored["json"]


def write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(handle, "w", encoding="utf8") as out:
        out.write(text)
    os.replace(temporary, path)
