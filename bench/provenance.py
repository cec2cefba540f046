"""Where and with what a result was produced: the one place that computes it.

Used by the benchmarks (`bench/__main__.py`), by the build's facts hook (`{{ version.* }}` and
`{{ verified_with }}`) and by the fault campaign's results. Standard library only, and torch is
not imported: the versions come from the installed packages' metadata.

    started = provenance.start()          # at the start of a run
    ...                                   # measure
    record = provenance.finish(started)   # at its end: everything below, as plain data
    provenance.worded(record)             # what a page says about it, computed when shown

A record is numbers and names only (no sentences); `worded` is how every page words one (the
benchmarks' views and the fault campaigns' results alike), so it is not stored.
"""

from __future__ import annotations

import contextlib
import datetime
import importlib.metadata
import os
import platform
import time
from pathlib import Path
from typing import Any

# What a page says it was verified with, in this order.
PACKAGES = ("torch", "numpy", "safetensors")


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def cores() -> int:
    """The cores this process may run on (its affinity), else the machine's."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def ram_gib() -> float:
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / (1 << 20), 1)
    return float("nan")


def filesystem_of(path: Path) -> str:
    """The filesystem type of the mount holding `path` (ext4, tmpfs, ...), from /proc/mounts."""
    try:
        mounts = [line.split() for line in Path("/proc/mounts").read_text().splitlines()]
    except OSError:
        return "unknown"
    resolved = str(path.resolve())
    best = ("", "unknown")
    for fields in mounts:
        point, kind = fields[1], fields[2]
        inside = resolved == point or resolved.startswith(point.rstrip("/") + "/")
        if inside and len(point) > len(best[0]):
            best = (point, kind)
    return best[1]


def machine(scratch: Path | None = None) -> dict[str, Any]:
    """CPU, cores, RAM and OS; with `scratch`, the filesystem results were written to."""
    found: dict[str, Any] = {
        "cpu": cpu_model(),
        "cores": cores(),
        "ram_gib": ram_gib(),
        "os": f"{platform.system()} {platform.release()}",
    }
    if scratch is not None:
        found["scratch_fs"] = filesystem_of(scratch)
    return found


def versions(*extra: str) -> dict[str, str]:
    """Installed versions of torch, numpy, safetensors (and `extra` packages), and Python."""
    found = {name: importlib.metadata.version(name) for name in (*PACKAGES, *extra)}
    return found | {"python": platform.python_version()}


def load_average() -> list[float]:
    """The 1-, 5- and 15-minute load averages (runnable processes; compare with the cores)."""
    if not hasattr(os, "getloadavg"):
        return [float("nan")] * 3
    return [round(x, 2) for x in os.getloadavg()]


def now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def start(scratch: Path | None = None, *extra: str) -> dict[str, Any]:
    """The record at the start of a run; `finish` completes it."""
    return {
        "started": now(),
        "load_average_start": load_average(),
        "machine": machine(scratch),
        "versions": versions(*extra),
        "_clock": time.monotonic(),
    }


def finish(started: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """The finished record: `started` plus the run's duration and the load at its end.

    `fields` (numbers and names: a mode, a thread count) are stored with it."""
    record = {key: value for key, value in started.items() if key != "_clock"}
    record["duration_s"] = round(time.monotonic() - started["_clock"], 1)
    record["load_average_end"] = load_average()
    return record | fields


# --- how a page words a record ----------------------------------------------------------------


def date(timestamp: str) -> str:
    """2026-11-30T09:11:33+00:00 as a page shows it: 2026-11-30 09:11 UTC."""
    day, _, clock = timestamp.partition("T")
    return f"{day} {clock[:5]} UTC"


def worded(record: dict[str, Any], method: str | None = None) -> dict[str, Any]:
    """The record with `date`, `load_average` and `summary` worded for a page; `method` (how
    many runs, say) is said before the load average."""
    m, v = record["machine"], record["versions"]
    start = record["load_average_start"][0]
    end = record["load_average_end"][0] if "load_average_end" in record else None
    scratch = f", {m['scratch_fs']} scratch disk" if "scratch_fs" in m else ""
    words = (
        f"{m['cpu']} ({m['cores']} cores, {m['ram_gib']} GiB RAM{scratch}), {m['os']}; "
        f"torch {v['torch']}, numpy {v['numpy']}, safetensors {v['safetensors']}, "
        f"Python {v['python']}"
    )
    if method is not None:
        words += "; " + method
    load = f"{start:.1f} at the start" + ("" if end is None else f", {end:.1f} at the end")
    words += f"; 1-minute load average {load}, on {m['cores']} cores"
    return record | {"date": date(record["started"]), "load_average": load, "summary": words}
