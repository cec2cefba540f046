"""Serve the recipe from the site itself: `downloads/recipe.py`, and `downloads/recipe_torchrun.py`
once that file exists, copied byte for byte from snippets/ when the site is built.

Because the files are part of the build's file list (mkdocs 1.6, `File.generated`), the recipe
page's relative link `[Download recipe.py](downloads/recipe.py)` is a link MkDocs checks under
`--strict`, and it works from a copy of the site opened from disk (file://), with no other host.
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent
SNIPPETS = ROOT / "snippets"
# Offered for download, from snippets/; a name whose file does not exist (yet) is skipped.
OFFERED = ("recipe.py", "recipe_torchrun.py")
FOLDER = "downloads"


def downloadable() -> list[Path]:
    return [SNIPPETS / name for name in OFFERED if (SNIPPETS / name).is_file()]


def on_files(files: Files, config) -> Files:
    for path in downloadable():
        files.append(File.generated(config, f"{FOLDER}/{path.name}", abs_src_path=str(path)))
    return files
