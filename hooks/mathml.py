"""Render \\( \\) and \\[ \\] math to MathML when the site is built.

Browsers draw MathML natively, so a page needs no script and no request to show its math.
pymdownx.arithmatex (generic mode) marks the math; this hook converts it.
"""

from __future__ import annotations

import html
import re

from latex2mathml.converter import convert
from mkdocs.exceptions import PluginError

INLINE = re.compile(r'<span class="arithmatex">\\\((?P<tex>.+?)\\\)</span>', re.S)
BLOCK = re.compile(r'<div class="arithmatex">\\\[(?P<tex>.+?)\\\]</div>', re.S)


def to_mathml(tex: str, display: str, page) -> str:
    try:
        return convert(html.unescape(tex).strip(), display=display)
    except Exception as err:  # latex2mathml raises many types; name the page and formula
        raise PluginError(f"{page.file.src_uri}: cannot render math {tex!r}: {err}") from err


# The table of contents keeps a heading's math as raw TeX; render it there too.
TOC_MATH = re.compile(r"\\\((?P<tex>.+?)\\\)")


def render_toc(items, page) -> None:
    for item in items:
        item.title = TOC_MATH.sub(lambda m: to_mathml(m["tex"], "inline", page), item.title)
        render_toc(item.children, page)


def on_page_content(content: str, page, config, files) -> str:
    render_toc(page.toc, page)
    content = BLOCK.sub(lambda m: to_mathml(m["tex"], "block", page), content)
    return INLINE.sub(lambda m: to_mathml(m["tex"], "inline", page), content)
