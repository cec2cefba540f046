"""The shape of the lab's code: no import circle (not even one that only type checkers follow,
nor one inside a function), and no module too long to read in one sitting."""

from __future__ import annotations

import ast
from pathlib import Path

import resume_lab

PACKAGE = Path(resume_lab.__file__).parent
MAX_LINES = 400


def imports_of(path: Path) -> set[str]:
    """Every resume_lab module `path` imports, anywhere in the file."""
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "resume_lab":
                # `from resume_lab import x`: the submodule x, else the package itself
                found |= {a.name if a.name in modules else "__init__" for a in node.names}
            elif node.module.startswith("resume_lab."):
                found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[1] for a in node.names if a.name.startswith("resume_lab.")}
    return found - {path.stem}


def graph() -> dict[str, set[str]]:
    return {p.stem: imports_of(p) for p in sorted(PACKAGE.glob("*.py"))}


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, str] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node], _ = "open", stack.append(node)
        for target in sorted(edges.get(node, ())):
            if state.get(target) == "open":
                return [*stack[stack.index(target) :], target]
            if target not in state and (cycle := visit(target)):
                return cycle
        state[node], _ = "done", stack.pop()
        return None

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_no_import_circle():
    edges = graph()
    # __init__ re-exports the public API; nothing inside the package may import it
    assert not [m for m, targets in edges.items() if "__init__" in targets and m != "__main__"]
    cycle = find_cycle({m: t for m, t in edges.items() if m != "__init__"})
    assert cycle is None, " -> ".join(cycle or [])


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_event_protocol_is_a_leaf():
    assert imports_of(PACKAGE / "events.py") == set()


def test_no_module_is_too_long_to_read():
    long = {
        p.name: n
        for p in PACKAGE.glob("*.py")
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"split these modules (over {MAX_LINES} lines): {long}"
