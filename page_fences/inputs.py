"""The files of the repository that code depends on, read from the code rather than run.

The build keeps what a fence computed under a key made of everything it was computed from
(hooks/build_cache.py). Those inputs are the fence's parts, every module of the repository the
parts import, and, at any depth, what those modules import: `import a.b`, `from a import b`
(`a.b` when it is a module), relative imports, imports inside functions, and
`importlib.import_module("literal")`. A module outside the repository (torch, the standard
library) is not followed: the installed versions are part of the key instead.
"""

from __future__ import annotations

import ast
import importlib.machinery
import importlib.util
import os
from collections.abc import Iterable, Iterator
from functools import cache
from pathlib import Path


def repository_files(sources: Iterable[tuple[str, str]], root: Path) -> set[Path]:
    """Every file of `root` that the code in `sources` ((filename, code) pairs) imports, at
    any depth, with each source file itself when it lies in `root`."""
    root = root.resolve()
    found: set[Path] = set()
    todo: list[str] = []  # module names still to follow
    for filename, code in sources:
        path = Path(filename).resolve()
        package = package_of(path, root) if ours(path, root) else None
        if ours(path, root) and path.suffix == ".py":
            found.add(path)
        todo += imported_names(code, package)
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for path in module_files(name, root):
            if path not in found:
                found.add(path)
                package = package_of(path, root)
                todo += file_imports(path, path.stat().st_mtime_ns, package)
    return found


# Folders of the repository's tree that hold no code of its own.
NOT_OURS = (".venv", "node_modules", "build", "site", ".git")


def ours(path: Path, root: Path) -> bool:
    """Whether `path` is a file of the repository (not of the packages installed in it)."""
    if not path.is_relative_to(root):
        return False
    return path.relative_to(root).parts[:1] not in {(folder,) for folder in NOT_OURS}


def python_files(root: Path) -> list[Path]:
    """Every Python file of the repository, in order (not those of the installed packages)."""
    found = []
    for folder, folders, files in os.walk(root):
        here = Path(folder)
        if here == root:
            folders[:] = [f for f in folders if f not in NOT_OURS]
        folders[:] = sorted(f for f in folders if not f.startswith((".", "__pycache__")))
        found += [here / name for name in sorted(files) if name.endswith(".py")]
    return found


def forget() -> None:
    """Look modules up again (a module may have been added since)."""
    module_files.cache_clear()
    in_repository.cache_clear()
    top_level.cache_clear()


def package_of(path: Path, root: Path) -> str | None:
    """The package a file of the repository belongs to, for its relative imports: the folders
    above it that hold an `__init__.py` (read from disk: nothing is imported)."""
    names: list[str] = []
    folder = path.parent
    while folder != root and (folder / "__init__.py").is_file():
        names.insert(0, folder.name)
        folder = folder.parent
    return ".".join(names) or None


@cache
def file_imports(path: Path, mtime_ns: int, package: str | None) -> tuple[str, ...]:
    return tuple(imported_names(path.read_text("utf8"), package))


def imported_names(code: str, package: str | None) -> Iterator[str]:
    """Module names `code` may import; `a.b` for `from a import b`, as b may be a module."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = absolute(node.module, node.level, package)
            if base is None:
                continue
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
        elif isinstance(node, ast.Call) and literal_import(node):
            yield node.args[0].value  # type: ignore[attr-defined]


def literal_import(node: ast.Call) -> bool:
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return (
        name == "import_module"
        and len(node.args) == 1
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    )


def absolute(module: str | None, level: int, package: str | None) -> str | None:
    if level == 0:
        return module
    if package is None:
        return None
    parts = package.split(".")
    if level - 1 > len(parts) - 1:
        return None
    base = ".".join(parts[: len(parts) - (level - 1)])
    return f"{base}.{module}" if module else base


@cache
def module_files(name: str, root: Path) -> list[Path]:
    """The files of `root` that importing `name` runs: the module and its parent packages'
    `__init__.py`; none when its top-level package lies outside the repository. Found on disk
    from the top-level package's folders, without importing anything (`a.b.C`, a class of
    module `a.b`, gives a/__init__.py and a/b.py)."""
    top, *rest = name.split(".")
    spec = top_level(top)
    if spec is None or not in_repository(top, root):
        return []
    files = [Path(spec.origin).resolve()] if spec.origin and spec.has_location else []
    folders = [Path(p) for p in spec.submodule_search_locations or []]
    for part in rest:
        package = [f / part for f in folders if (f / part).is_dir()]
        module = [f / f"{part}.py" for f in folders if (f / f"{part}.py").is_file()]
        if package:
            files += [p / "__init__.py" for p in package if (p / "__init__.py").is_file()]
            folders = package
        elif module:
            files.append(module[0].resolve())
            break
        else:
            break  # an attribute of the module, not a module
    return [f for f in files if ours(f, root)]


@cache
def top_level(top: str) -> importlib.machinery.ModuleSpec | None:
    try:
        return importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None


@cache
def in_repository(top: str, root: Path) -> bool:
    """Whether the top-level module or package `top` is one of the repository's (finding a
    top-level spec imports nothing)."""
    spec = top_level(top)
    if spec is None:
        return False
    places = [spec.origin] if spec.origin and spec.has_location else []
    places += list(spec.submodule_search_locations or [])
    return any(ours(Path(p).resolve(), root) for p in places)
