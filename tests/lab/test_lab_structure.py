"""The shape of the lab's code: no import circle (not even one that only type checkers follow,
nor one inside a function), at most eleven layers of imports, no module too long to read in one
sitting; a one-process run that never loads DCP; a package map that names every module; one
module that names every file of a run folder."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import resume_lab
from resume_lab import run_files
from resume_lab.exit_codes import EXIT_OK, EXIT_PREEMPTED
from resume_lab.launcher import environment

PACKAGE = Path(resume_lab.__file__).parent
MAX_LINES = 400


def imports_of(path: Path) -> set[str]:
    """Every resume_lab module `path` imports, anywhere in the file."""
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf8"))):
        if isinstance(node, ast.ImportFrom):
            # the package is flat: a relative import (`from . import x`, `from .x import y`)
            # is one from resume_lab
            module = node.module or ""
            if node.level:
                module = f"resume_lab.{module}" if module else "resume_lab"
            if module == "resume_lab":
                # `from resume_lab import x`: the submodule x, else the package itself
                found |= {a.name if a.name in modules else "__init__" for a in node.names}
            elif module.startswith("resume_lab."):
                found.add(module.split(".")[1])
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


def test_relative_imports_count_as_imports_of_the_lab(tmp_path):
    module = tmp_path / "probe.py"
    module.write_text("from . import callbacks\nfrom .loop import Trainer\n")
    assert imports_of(module) == {"callbacks", "loop"}


def test_no_module_is_too_long_to_read():
    long = {
        p.name: n
        for p in PACKAGE.glob("*.py")
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"split these modules (over {MAX_LINES} lines): {long}"


# --- how deep the package is, and what a one-process run loads --------------------------------

MAX_LAYERS = 11


def layers(edges: dict[str, set[str]]) -> dict[str, int]:
    """Each module's layer: 1 for a module that imports nothing of the package, else one above
    the highest module it imports (the graph has no circle)."""
    found: dict[str, int] = {}

    def layer(module: str) -> int:
        if module not in found:
            found[module] = 1 + max((layer(t) for t in edges.get(module, ())), default=0)
        return found[module]

    for module in edges:
        layer(module)
    return found


def deepest_chain(edges: dict[str, set[str]]) -> list[str]:
    depth = layers(edges)
    chain = [max(depth, key=lambda m: (depth[m], m))]
    while edges.get(chain[-1]):
        chain.append(max(edges[chain[-1]], key=lambda m: (depth[m], m)))
    return chain


def test_the_import_graph_is_at_most_eleven_layers_deep():
    edges = graph()
    assert {"cli", "__main__", "__init__"} <= set(edges)  # every module counts
    chain = deepest_chain(edges)
    assert len(chain) <= MAX_LAYERS, " -> ".join(chain)


def test_the_layer_count_counts_layers():
    assert layers({"a": {"b"}, "b": {"c"}, "c": set()}) == {"a": 3, "b": 2, "c": 1}
    assert deepest_chain({"a": {"b", "c"}, "b": set(), "c": {"b"}}) == ["a", "c", "b"]


# The same code a fresh `python -m resume_lab train` runs: a start stopped after 2 updates and a
# resume to the end, in one process; the modules loaded then; and, the control, the same runs on
# two logical shards (still one process) in another folder, and the modules loaded after them.
LOADED_BY_TRAIN = """
import json, sys
from resume_lab.cli import main

def train(folder, *extra):
    args = ["train", "--output-dir", folder, "--steps", "4", "--quiet", *extra]
    return [main([*args, "--stop-after", "2"]), main(args)]

one = train(sys.argv[1])
after_one = sorted(sys.modules)
sharded = train(sys.argv[2], "--shards", "2")
print(json.dumps({"exits": [one, sharded], "loaded": [after_one, sorted(sys.modules)]}))
"""
DCP_MODULES = ["resume_lab.dcp_store", "torch.distributed.checkpoint"]


# A new process that imports torch and trains four runs: a `make test-all` check (heavy:
# page_fences/tiers.py), like the lab's other new-process resume (test_lab_process.py).
@pytest.mark.heavy
def test_a_one_process_train_never_imports_the_dcp_store(tmp_path: Path):
    found = subprocess.run(
        [sys.executable, "-c", LOADED_BY_TRAIN, str(tmp_path / "one"), str(tmp_path / "two")],
        env=environment(),
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    report = json.loads(found.stdout.splitlines()[-1])
    assert report["exits"] == [[EXIT_PREEMPTED, EXIT_OK]] * 2  # stopped, then resumed
    after_one, after_sharded = report["loaded"]
    assert [m for m in DCP_MODULES if m in after_one] == []
    assert [m for m in DCP_MODULES if m in after_sharded] == DCP_MODULES  # the control


# --- what the package says of itself ------------------------------------------------------------


def test_the_package_map_names_every_module():
    doc = resume_lab.__doc__ or ""
    named = set(re.findall(r"\b[a-z_]+\b", doc))
    modules = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__", "__main__"}
    assert sorted(modules - named) == []


def test_only_run_files_names_the_files_of_a_run_folder():
    """Every name of a run folder is a constant of run_files.py, and no other module spells one
    out (last and best are also ordinary words: they may not be assigned to a constant)."""
    spelled = {n for n in run_files.NAMES if n not in (run_files.LAST, run_files.BEST)}
    found = []
    for path in sorted(PACKAGE.glob("*.py")):
        if path.name == "run_files.py":
            continue
        for node in ast.walk(ast.parse(path.read_text("utf8"))):
            if isinstance(node, ast.Constant) and node.value in spelled:
                found.append(f"{path.name}:{node.lineno} {node.value!r}")
            if (
                isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Constant)
                and node.value.value in run_files.NAMES
            ):
                found.append(f"{path.name}:{node.lineno} {node.value.value!r}")
    assert found == []


def test_no_override_is_silenced():
    """A subclass that changes a method's signature breaks what its callers rely on; the lab has
    none (mypy would say so, were it not silenced)."""
    silenced = [
        f"{p.name}:{n}"
        for p in sorted(PACKAGE.glob("*.py"))
        for n, line in enumerate(p.read_text("utf8").splitlines(), 1)
        if "type: ignore[override]" in line
    ]
    assert silenced == []
