"""The inner loop and the rest: what `make test` leaves to `make test-all`, and a guard that
keeps it that way. The root conftest.py registers this plugin.

`make test` is what a contributor runs after each change: `-m "not slow and not full and not
heavy"` (Makefile). `make test-all` then runs `-m heavy` and `-m "slow or full"`: every test runs
in exactly one of the three. A plain `pytest` leaves out only slow and full (pyproject.toml), so
`pytest tests/browser` or `pytest docs/scaling-out.md` runs the part you are editing in full.
`heavy` (registered in pyproject.toml) marks what CI runs but the inner loop cannot afford:

- the browser's reading of the site (tests/browser, all but test_smoke.py), in its modules;
- the quick tier of tests/distributed that launches torchrun, at each test;
- tests whose runs are real processes, forked or started, killed and run again: the recipe's
  runs (tests/recipe/test_recipe.py), the fault campaign's processes
  (tests/reliability/test_campaign_processes.py, its quick tier), the lab's resume in a new
  process (tests/lab/test_lab_process.py), the distributed demo's overrun
  (tests/lab/test_distributed_demo.py), at each test;
- tests that start a new Python that imports torch or pytest: the fence runner's own pytest run
  (tests/docs/test_runner.py), a snippet's printed output (tests/site/test_build_facts.py), the
  quick benchmark runs (tests/bench/), at each test;
- the pages' blocks that start gloo ranks: a fence says so with `.ranks` in its options,
  ```` ```{.python #id .ranks} ````, and is marked `heavy` here when it is collected;
- any other page block that is a long check says so with `.heavy`,
  ```` ```{.python #id .heavy} ```` (the block that forks a process and SIGKILLs it before
  every system call of a save, checkpoints.md#kill-every-phase).

The guard: a test or fence of the inner loop (marked none of `heavy`, `slow`, `full`) that
starts gloo ranks (`torch.multiprocessing.start_processes`, which snippets/gloo_ranks.py uses)
or torchrun fails at once, before any process starts, and says how to mark it; and a `.ranks`
fence that starts no ranks fails, so the option never outlives what it says.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import torch.multiprocessing

from page_fences.census import fences

HEAVY = "heavy"
# Tests with any of these markers are left out of `make test` (the Makefile's -m).
OUTER = (HEAVY, "slow", "full")
# The fence option that marks a block starting gloo ranks.
RANKS = ".ranks"
# The fence option that marks any other block too long for the inner loop (one that forks
# and kills processes, say): the fence's `@pytest.mark.heavy`.
LONG = ".heavy"
# The marker pytest-markdown-docs gives every fence it collects.
FENCE = "markdown-docs"


class InnerLoopError(Exception):
    """Something too slow for `make test` was started by a test or fence of `make test`."""


@cache
def _options_by_line(page: Path) -> dict[int, tuple[str, ...]]:
    return {fence.line: fence.options for fence in fences(page.read_text("utf8"))}


def fence_options(item: pytest.Item) -> tuple[str, ...] | None:
    """A fence's options as the page writes them (None for an item that is no fence)."""
    if not item.get_closest_marker(FENCE):
        return None
    path, line, _ = item.reportinfo()  # the line of the opening fence, 1-based
    return _options_by_line(Path(path)).get(line or 0, ())


def starts_ranks(item: pytest.Item) -> bool:
    return RANKS in (fence_options(item) or ())


def pytest_itemcollected(item: pytest.Item) -> None:
    """Before `-m` deselects anything: a fence that starts ranks, or says it is long, is
    `heavy`."""
    if starts_ranks(item) or LONG in (fence_options(item) or ()):
        item.add_marker(HEAVY)


def in_inner_loop(item: pytest.Item) -> bool:
    return not any(item.get_closest_marker(name) for name in OUTER)


def launches_torchrun(args: Any) -> bool:
    words = args.split() if isinstance(args, str) else [str(a) for a in args]
    return any(Path(w).name == "torchrun" or w == "torch.distributed.run" for w in words)


def _where(item: pytest.Item) -> str:
    """A fence by its page and line, a test by its node id."""
    if fence_options(item) is None:
        return item.nodeid
    _, line, _ = item.reportinfo()
    return f"the block at {item.nodeid.partition('::')[0]}:{line}"


@contextlib.contextmanager
def guarded(item: pytest.Item) -> Iterator[list[str]]:
    """While a test or fence of the inner loop sets up and runs, starting ranks or torchrun
    raises InnerLoopError; in a `.ranks` fence, what it starts is recorded (yielded)."""
    started: list[str] = []
    inner = in_inner_loop(item)
    if not inner and not starts_ranks(item):
        yield started
        return

    def refuse(what: str) -> None:
        if fence_options(item) is not None:
            how = f"add `{RANKS}` to the fence's options: ```{{.python #id {RANKS}}}```"
        else:
            how = f"mark it `@pytest.mark.{HEAVY}`"
        raise InnerLoopError(
            f"{_where(item)} starts {what}, too slow for `make test`: {how}, "
            "and it runs in `make test-all` (page_fences/tiers.py)"
        )

    spawn = sys.modules["torch.multiprocessing.spawn"]
    real_start = spawn.start_processes

    def start_processes(*args: Any, **kwargs: Any) -> Any:
        if inner:
            refuse("processes with torch.multiprocessing (gloo ranks)")
        started.append("ranks")
        return real_start(*args, **kwargs)

    class Popen(subprocess.Popen):
        def __init__(self, args: Any, *rest: Any, **options: Any) -> None:
            if inner and launches_torchrun(args):
                refuse("torchrun")
            super().__init__(args, *rest, **options)

    with pytest.MonkeyPatch.context() as patch:
        for owner in (torch.multiprocessing, spawn):
            patch.setattr(owner, "start_processes", start_processes)
        patch.setattr(subprocess, "Popen", Popen)
        yield started


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    with guarded(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    with guarded(item) as started:
        result = yield
    if starts_ranks(item) and not started:
        raise InnerLoopError(
            f"{_where(item)} has `{RANKS}` in its options but started no gloo ranks: remove "
            "the option, and the block runs in `make test`"
        )
    return result
