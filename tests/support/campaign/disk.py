"""A model of the disk under a run folder, and of what a power cut keeps of it.

`Disk` watches every call that changes the tree under one folder (open for writing, write,
fsync, mkdir, rename, symlink, unlink, rmdir, truncate; also the ones shutil.rmtree makes
relative to a directory descriptor) and models what survives a power cut before any of them:

- a file's data is durable as of its last fsync (or fdatasync). A file created since watching
  started and never synced comes back empty; a file changed since its last fsync comes back as
  it was then, cut to the smallest size it has had since (an append is lost, a truncation kept);
- a directory's entries (names, the files and directories they name, symlink targets) are
  durable as of that directory's own last fsync. Each directory whose entries changed since
  may come back either way, independently of the others, so a power cut leaves up to 2**k
  worlds, k being the number of such directories (a few: the run folder, the checkpoint being
  written, the one being deleted);
- everything under the folder when watching starts is durable.

A symlink's target is part of its directory entry: created with it, never changed in place.

`sweep()` runs an operation once to list its calls, then again and again with a power cut
before each call in turn, and checks every world a cut can leave.
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import hashlib
import io
import itertools
import os
import re
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# One entry of a directory: ("file", inode), ("dir", inode) or ("link", target).
Entry = tuple[str, Any]
# A world: the tree as a power cut leaves it, by path relative to the folder:
# ("file", bytes), ("dir", None) or ("link", target).
World = dict[str, tuple[str, Any]]

WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


class SimulatedCrash(BaseException):
    """The machine stopped at this call. A BaseException, so no `except Exception` swallows it;
    `finally` blocks still run, but every call they make finds the machine off."""


@dataclass(frozen=True)
class Call:
    kind: str  # open, write, fsync, fsync_dir, mkdir, rename, replace, symlink, unlink, ...
    name: str  # the path it concerns, relative to the watched folder


def fd_path(fd: int) -> str:
    return os.readlink(f"/proc/self/fd/{fd}")


class WatchedFile:
    """A file opened for writing under the watched folder: each write() is a call of its own."""

    def __init__(self, disk: Disk, file: Any, name: str) -> None:
        self._disk, self._file, self._name = disk, file, name

    def write(self, data: Any) -> int:
        self._disk.call("write", self._name)
        return self._file.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._file, name)

    def __enter__(self) -> WatchedFile:
        return self

    def __exit__(self, *exc: Any) -> None:
        self._file.close()

    def __iter__(self) -> Iterator[Any]:
        return iter(self._file)


class Disk:
    """Watches the calls that change the tree under `folder`; models what a power cut keeps.

    stop_at=i: simulate the power cut just before call i (the worlds are in `self.worlds`);
    every later call raises SimulatedCrash too. fail_at=i: make call i raise `error` instead
    (the process lives on and cleans up). Like the real call, the error names the path for
    calls that take one (open, rename, unlink, ...), and not for write or fsync.
    """

    def __init__(
        self,
        folder: Path,
        *,
        stop_at: int | None = None,
        fail_at: int | None = None,
        error: Callable[[], OSError] | None = None,
    ) -> None:
        self.folder = Path(folder).resolve()
        self.stop_at, self.fail_at = stop_at, fail_at
        self.error = error or (lambda: OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))
        self.calls: list[Call] = []
        self.worlds: list[World] | None = None
        self.off = False
        self.root = self.folder.stat().st_ino
        directories, files = self.scan()
        self.synced_entries: dict[int, dict[str, Entry]] = directories
        self.synced_data = {ino: path.read_bytes() for ino, path in files.items()}
        self.low_water: dict[int, int] = {}  # smallest size since the last fsync
        self._pinned: list[int] = []  # inodes kept alive: a deleted one's number is not reused
        self._real: dict[tuple[Any, str], Any] = {}

    # --- the model ----------------------------------------------------------------------------

    def scan(self) -> tuple[dict[int, dict[str, Entry]], dict[int, Path]]:
        """The entries of every directory under the folder, as they are; and every file."""
        directories: dict[int, dict[str, Entry]] = {}
        files: dict[int, Path] = {}

        def walk(path: str, ino: int) -> None:
            entries: dict[str, Entry] = {}
            with os.scandir(path) as listing:
                for child in listing:
                    status = child.stat(follow_symlinks=False)
                    if stat.S_ISLNK(status.st_mode):
                        entries[child.name] = ("link", os.readlink(child.path))
                    elif stat.S_ISDIR(status.st_mode):
                        entries[child.name] = ("dir", status.st_ino)
                        walk(child.path, status.st_ino)
                    else:
                        entries[child.name] = ("file", status.st_ino)
                        files[status.st_ino] = Path(child.path)
            directories[ino] = entries

        walk(str(self.folder), self.root)
        return directories, files

    def content(self, ino: int) -> bytes:
        if ino not in self.synced_data:
            return b""  # never synced: the pessimistic case, and what delayed allocation leaves
        data, cut = self.synced_data[ino], self.low_water.get(ino)
        return data if cut is None else data[:cut]

    def power_cut(self) -> list[World]:
        """Every world a power cut right now can leave (distinct ones, in a fixed order)."""
        current, _ = self.scan()
        changed = sorted(
            ino
            for ino in set(current) | set(self.synced_entries)
            if current.get(ino, {}) != self.synced_entries.get(ino, {})
        )
        assert len(changed) <= 8, f"{len(changed)} directories changed since their last fsync"
        worlds: dict[tuple[Any, ...], World] = {}
        for kept in itertools.product((False, True), repeat=len(changed)):
            synced = {ino for ino, keep in zip(changed, kept, strict=True) if keep}
            world = self.world(current, synced)
            worlds.setdefault(fingerprint(world), world)
        return list(worlds.values())

    def world(self, current: dict[int, dict[str, Entry]], synced: set[int]) -> World:
        """The tree with the directories in `synced` as of their last fsync, the others as
        they are now."""
        world: World = {}

        def build(ino: int, prefix: str, seen: frozenset[int]) -> None:
            source = self.synced_entries if ino in synced else current
            for name, (kind, value) in sorted(source.get(ino, {}).items()):
                path = prefix + name
                if kind == "dir":
                    world[path] = ("dir", None)
                    if value not in seen:
                        build(value, path + "/", seen | {value})
                elif kind == "link":
                    world[path] = ("link", value)
                else:
                    world[path] = ("file", self.content(value))

        build(self.root, "", frozenset({self.root}))
        return world

    def call(self, kind: str, name: str) -> None:
        if self.off:
            raise SimulatedCrash(f"the machine is off: {kind} {name}")
        index = len(self.calls)
        self.calls.append(Call(kind, name))
        if index == self.stop_at:
            self.worlds = self.power_cut()
            self.off = True
            raise SimulatedCrash(f"power cut before call {index}: {kind} {name}")
        if index == self.fail_at:
            error = self.error()
            if kind not in ("write", "fsync", "fsync_dir"):
                error.filename = os.fspath(self.folder / name)
            raise error

    # --- watching -----------------------------------------------------------------------------

    def inside(self, path: Any, dir_fd: int | None = None) -> str | None:
        """`path` relative to the folder, if it is under it (a symlink is not followed)."""
        if isinstance(path, int):
            return None
        text = os.fsdecode(path)
        if dir_fd is not None and not os.path.isabs(text):
            text = os.path.join(fd_path(dir_fd), text)
        text = os.path.abspath(text)
        full = os.path.join(os.path.realpath(os.path.dirname(text)), os.path.basename(text))
        relative = os.path.relpath(full, self.folder)
        return None if relative == ".." or relative.startswith("../") else relative

    def pin(self, path: Any, dir_fd: int | None = None) -> None:
        """Keep the inode `path` names alive until watching ends (not for a symlink)."""
        with contextlib.suppress(OSError):
            flags = os.O_RDONLY | os.O_NOFOLLOW
            self._pinned.append(self._real[os, "open"](path, flags, dir_fd=dir_fd))

    def synced(self, fd: int) -> None:
        """After a real fsync of `fd`: what it holds is durable now."""
        status = os.fstat(fd)
        if stat.S_ISDIR(status.st_mode):
            directories, _ = self.scan()
            self.synced_entries[status.st_ino] = directories.get(status.st_ino, {})
        else:
            with self._real[builtins, "open"](f"/proc/self/fd/{fd}", "rb") as f:
                self.synced_data[status.st_ino] = f.read()
            self.low_water.pop(status.st_ino, None)

    def truncated(self, ino: int, size: int) -> None:
        if ino in self.synced_data:
            self.low_water[ino] = min(self.low_water.get(ino, size), size)

    @contextlib.contextmanager
    def watching(self) -> Iterator[Disk]:
        real = self._real
        for module, name in (
            (builtins, "open"),
            (io, "open"),
            (os, "open"),
            (os, "fsync"),
            (os, "fdatasync"),
            (os, "replace"),
            (os, "rename"),
            (os, "symlink"),
            (os, "mkdir"),
            (os, "unlink"),
            (os, "remove"),
            (os, "rmdir"),
            (os, "truncate"),
        ):
            real[module, name] = getattr(module, name)

        def watched_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
            name = self.inside(file)
            if name is None or not set(mode) & set("wax+"):
                return real[builtins, "open"](file, mode, *args, **kwargs)
            self.call("open", name)
            opened = real[builtins, "open"](file, mode, *args, **kwargs)
            if "w" in mode:
                self.truncated(os.fstat(opened.fileno()).st_ino, 0)
            return WatchedFile(self, opened, name)

        def watched_os_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
            name = self.inside(path, kwargs.get("dir_fd"))
            if name is None or not flags & WRITE_FLAGS:
                return real[os, "open"](path, flags, *args, **kwargs)
            self.call("open", name)
            fd = real[os, "open"](path, flags, *args, **kwargs)
            if flags & os.O_TRUNC:
                self.truncated(os.fstat(fd).st_ino, 0)
            return fd

        def syncing(kind: str) -> Callable[[int], None]:
            def watched(fd: int) -> None:
                name = self.inside(fd_path(fd))
                if name is None:
                    return real[os, kind](fd)
                directory = stat.S_ISDIR(os.fstat(fd).st_mode)
                self.call("fsync_dir" if directory else "fsync", name)
                real[os, kind](fd)
                self.synced(fd)

            return watched

        def renaming(kind: str) -> Callable[..., None]:
            def watched(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
                name = self.inside(dst, kwargs.get("dst_dir_fd"))
                if name is not None:
                    self.call(kind, name)
                    self.pin(dst, kwargs.get("dst_dir_fd"))  # what it replaces, if anything
                real[os, kind](src, dst, *args, **kwargs)

            return watched

        def watched_symlink(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
            name = self.inside(dst, kwargs.get("dir_fd"))
            if name is not None:
                self.call("symlink", name)
            real[os, "symlink"](src, dst, *args, **kwargs)

        def simple(kind: str, function: str, pin: bool) -> Callable[..., Any]:
            def watched(path: Any, *args: Any, **kwargs: Any) -> Any:
                name = self.inside(path, kwargs.get("dir_fd"))
                if name is not None:
                    self.call(kind, name)
                    if pin:
                        self.pin(path, kwargs.get("dir_fd"))
                return real[os, function](path, *args, **kwargs)

            return watched

        def watched_truncate(path: Any, length: int) -> None:
            name = self.inside(path)
            if name is not None:
                self.call("truncate", name)
                self.truncated(os.stat(path).st_ino, length)
            real[os, "truncate"](path, length)

        replacements = {
            (builtins, "open"): watched_open,
            (io, "open"): watched_open,
            (os, "open"): watched_os_open,
            (os, "fsync"): syncing("fsync"),
            (os, "fdatasync"): syncing("fdatasync"),
            (os, "replace"): renaming("replace"),
            (os, "rename"): renaming("rename"),
            (os, "symlink"): watched_symlink,
            (os, "mkdir"): simple("mkdir", "mkdir", pin=False),
            (os, "unlink"): simple("unlink", "unlink", pin=True),
            (os, "remove"): simple("unlink", "remove", pin=True),
            (os, "rmdir"): simple("rmdir", "rmdir", pin=True),
            (os, "truncate"): watched_truncate,
        }
        for (module, name), function in replacements.items():
            setattr(module, name, function)
        try:
            yield self
        finally:
            for (module, name), function in real.items():
                setattr(module, name, function)
            for fd in self._pinned:
                os.close(fd)
            self._pinned = []


# The random part of a temporary name (tmp-step-000012-8d5e5ba9, last.tmp-4e99e618): two
# worlds that differ only there are the same world to a restart.
RANDOM_PART = re.compile(r"(tmp-(?:[^/]*-)?)[0-9a-f]{8}(?=/|$)")


def fingerprint(world: World) -> tuple[tuple[str, str, str], ...]:
    def value(kind: str, data: Any) -> str:
        return hashlib.sha256(data).hexdigest() if kind == "file" else str(data)

    return tuple(
        sorted(
            (RANDOM_PART.sub(r"\1*", path), kind, value(kind, data))
            for path, (kind, data) in world.items()
        )
    )


def materialize(world: World, folder: Path) -> Path:
    """Write `world` out as a real tree under `folder` (a new folder)."""
    folder.mkdir(parents=True)
    for path, (kind, data) in sorted(world.items()):  # a directory before what it holds
        target = folder / path
        if kind == "dir":
            target.mkdir()
        elif kind == "link":
            os.symlink(data, target)
        else:
            target.write_bytes(data)
    return folder


def distinct_points(calls: list[Call]) -> list[int]:
    """Every call except a write that follows a write to the same file: stopping there gives
    the same worlds as stopping at the first write of the run (unsynced data is lost anyway)."""
    return [
        i
        for i, c in enumerate(calls)
        if not (c.kind == "write" and i and calls[i - 1].kind == "write" and calls[i - 1] == c)
    ]


@dataclass
class SweepResult:
    calls: list[Call]
    points: int = 0  # crash (or fault) points tried
    worlds: int = 0  # distinct disk states checked
    failures: list[str] = field(default_factory=list)


def sweep(
    run: Callable[[], Any],
    folder: Path,
    reset: Callable[[], None],
    check: Callable[[World], list[str]],
    *,
    every_call: bool,
    check_done: Callable[[World], list[str]] | None = None,
) -> SweepResult:
    """Stop `run` by a power cut before each call it makes in `folder`; check every world.

    `reset` puts the folder (and any object `run` changes) back before each attempt.
    `check(world)` lists what is wrong with a world; identical worlds are checked once.
    The completed run is checked too, as a power cut right after it, with `check_done`: an
    operation that has returned must have made its result durable.
    """
    reset()
    disk = Disk(folder)
    with disk.watching():
        run()
    result = SweepResult(calls=disk.calls)
    checked: dict[tuple[Any, ...], list[str]] = {}

    def judge(where: str, worlds: list[World], check: Callable[[World], list[str]]) -> None:
        for world in worlds:
            key = (id(check), fingerprint(world))
            if key not in checked:
                checked[key] = check(world)
            result.failures += [f"{where}: {problem}" for problem in checked[key]]

    judge("after it returned", disk.power_cut(), check_done or check)
    points = range(len(disk.calls)) if every_call else distinct_points(disk.calls)
    for index in points:
        reset()
        crashed = Disk(folder, stop_at=index)
        with crashed.watching():
            try:
                run()
            except BaseException:  # the crash, or what torch.save made of it
                if crashed.worlds is None:
                    raise
        assert crashed.worlds is not None, f"the run never reached call {index}"
        call = disk.calls[index]
        judge(f"power cut before call {index} ({call.kind} {call.name})", crashed.worlds, check)
    result.points = len(points) + 1
    result.worlds = len(checked)
    return result
