"""Lint the code on the pages as the code in snippets/ is linted.

Every python fence on a page is written to a file named after its page and line, and ruff runs
once over all of them with snippets/ruff.toml: the same rules, and `ruff format --check` at 80
columns. Include lines (`--8<-- "snippets/x.py"`) stay in as comments: the files they bring in
are linted where they live. Fences that include code may use names it defines (F821 is not
reported for them).

    python -m page_fences.lint          # report, exit 1 on any problem (make lint)
    python -m page_fences.lint --fix    # apply ruff's fixes and format to the pages
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from page_fences.census import INCLUDE_LINE, PYTHON_LANGS, Fence, fences, pages

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "snippets" / "ruff.toml"
WITH_INCLUDES = "with_includes"  # the folder for fences that include a file or section


@dataclass(frozen=True)
class PageFence:
    page: Path
    fence: Fence

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.fence.line}"

    @property
    def includes(self) -> bool:
        return any(INCLUDE_LINE.match(line) for line in self.fence.body)

    def code(self) -> str:
        """The body as the page shows it, out of its container; include lines as comments."""
        cut = len(self.fence.indent)
        lines = [line[cut:] for line in self.fence.body]
        return "".join(
            f"# {line.strip()}\n" if INCLUDE_LINE.match(line) else f"{line}\n" for line in lines
        )

    def file_name(self) -> str:
        folder = WITH_INCLUDES if self.includes else "inline"
        return f"{folder}/{self.page.stem.replace('-', '_')}_line_{self.fence.line}.py"


def page_fences(docs: Path = ROOT / "docs") -> list[PageFence]:
    """Every python fence with code of its own (include-only fences are linted as their files)."""
    found = []
    for page in pages(docs):
        for fence in fences(page.read_text("utf8")):
            if fence.lang not in PYTHON_LANGS or "notest" in fence.options:
                continue
            own = [line for line in fence.body if line.strip() and not INCLUDE_LINE.match(line)]
            if own:
                found.append(PageFence(page, fence))
    return found


def ruff(*args: str) -> subprocess.CompletedProcess[str]:
    # From the repository: ruff resolves `src` (what is first-party) from where it runs.
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )


def write_all(folder: Path, found: list[PageFence]) -> dict[Path, PageFence]:
    (folder / "ruff.toml").write_text(
        f'extend = "{CONFIG}"\n\n[lint]\n'
        f'extend-per-file-ignores = {{ "{folder}/{WITH_INCLUDES}/*.py" = ["F401", "F821"] }}\n'
    )
    written = {}
    for item in found:
        path = folder / item.file_name()
        path.parent.mkdir(exist_ok=True)
        path.write_text(item.code(), "utf8")
        written[path.resolve()] = item
    return written


def problems(found: list[PageFence] | None = None) -> list[str]:
    """`docs/PAGE.md:LINE: ...` for every lint finding and every fence not formatted."""
    found = page_fences() if found is None else found
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        written = write_all(folder, found)
        config = ["--no-cache", "--config", str(folder / "ruff.toml")]
        checked = ruff("check", *config, "--output-format=json", "--exit-zero", str(folder))
        if checked.returncode != 0:
            raise RuntimeError(f"ruff check did not run: {checked.stderr}")
        report = []
        for finding in json.loads(checked.stdout):
            item = written[Path(finding["filename"]).resolve()]
            line = item.fence.line + finding["location"]["row"]
            report.append(
                f"{item.page.relative_to(ROOT)}:{line}: {finding['code']} {finding['message']}"
            )
        formatted = ruff("format", *config, "--diff", str(folder))
        if formatted.returncode not in (0, 1):
            raise RuntimeError(f"ruff format did not run: {formatted.stderr}")
        for path, item in written.items():
            if f"{path}\n" in formatted.stdout or f"{path}\t" in formatted.stdout:
                report.append(
                    f"{item.where}: fence is not formatted as `ruff format` (80 columns) would"
                )
        if report:
            report.append(formatted.stdout)
        return report


def fix() -> int:
    """Sort imports and format each fence that needs it, on its page (other findings are left
    for a person: their fixes can change what the code means)."""
    found = page_fences()
    changed = 0
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        written = write_all(folder, found)
        config = ["--no-cache", "--config", str(folder / "ruff.toml")]
        ruff("check", *config, "--select", "I", "--fix", "--exit-zero", str(folder))
        ruff("format", *config, str(folder))
        by_page: dict[Path, list[tuple[PageFence, str]]] = {}
        for path, item in written.items():
            new = path.read_text("utf8")
            if new != item.code():
                by_page.setdefault(item.page, []).append((item, new))
        for page, edits in by_page.items():
            text = page.read_text("utf8").splitlines(keepends=True)
            # From the bottom up, so that a fence's new length moves no fence still to edit.
            for item, new in sorted(edits, key=lambda edit: -edit[0].fence.line):
                start, body = item.fence.line, item.fence.body
                if [line.rstrip("\n") for line in text[start : start + len(body)]] != list(body):
                    print(f"{item.where}: the page changed meanwhile; skipped", file=sys.stderr)
                    continue
                lines = []
                for line in new.splitlines():
                    if line.startswith("# ") and INCLUDE_LINE.match(line[2:]):
                        line = line[2:]
                    lines.append(f"{item.fence.indent}{line}\n" if line else "\n")
                text[start : start + len(body)] = lines
                changed += 1
                print(f"{item.where}: formatted")
            page.write_text("".join(text), "utf8")
    return changed


if __name__ == "__main__":
    if "--fix" in sys.argv[1:]:
        fix()
        sys.exit(0)
    found_problems = problems()
    print("\n".join(found_problems))
    sys.exit(1 if found_problems else 0)
