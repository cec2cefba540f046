"""Serve third-party browser files from our own site instead of a CDN.

They are installed from the npm registry at set-up (package.json pins them) and are not
committed; this hook adds them to the build under assets/vendor/.
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent

# site path -> installed file
VENDORED = {
    "assets/vendor/iframe-worker/shim.js": "node_modules/iframe-worker/shim/index.js",
}


def on_files(files: Files, config) -> Files:
    for dest, installed in VENDORED.items():
        source = ROOT / installed
        if not source.is_file():
            raise PluginError(
                f"{installed} is missing: run `make build` (or `npm ci`) to install the site's "
                "browser assets from package-lock.json"
            )
        files.append(File.generated(config, dest, abs_src_path=str(source)))
    return files
