"""axe-core in the browser tests: the rules, the run, and a failure message a person can act on.

axe-core is pinned in package.json / package-lock.json and installed by `make` (`npm ci`) into
node_modules, like the site's other browser files; the tests inject that copy into each page
(inline, so nothing is fetched). It is a test tool: the built site does not ship it.
"""

from __future__ import annotations

import json
from functools import cache
from typing import TYPE_CHECKING

from browser_colour import COLOUR_HELPERS, COLOUR_MARK
from built_site import ROOT

if TYPE_CHECKING:
    from playwright.sync_api import Page

AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
LOCK = ROOT / "package-lock.json"

# WCAG 2.0 and 2.1, levels A and AA, and axe's best practices (landmarks, headings, ...).
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]

# Rules whose findings we accept, with the reason; empty while every page passes them all.
ACCEPTED: dict[str, str] = {}

# Only these rules depend on colour; the markup, and so every other rule's finding, is the same
# in both schemes. The light tab runs every rule, the dark tab these.
COLOUR_RULES = ["color-contrast", "link-in-text-block"]

# Code blocks are thousands of highlighted tokens, each with one of a dozen colours on the code
# block's background: axe-core's color-contrast spends most of its time on them. It skips them,
# and CODE_CONTRAST below checks every token on every page with the same formula instead.
CODE_TOKENS = ".highlight code span"

# Start an audit and return at once (axe.run works synchronously for most of its time, so it
# starts on the next tick), so that two tabs, two renderer processes, audit at the same time;
# `RESULT` waits for it. Only violations come back, each node as its selector, HTML and summary.
START = """({tags, rules, codeTokens}) => {
  axe.configure({rules: [{id: "color-contrast", selector: `*:not(${codeTokens})`}]});
  const only = rules ? {type: "rule", values: rules} : {type: "tag", values: tags};
  // Preloading the style sheets serves one rule (css-orientation-lock), which is not a colour
  // rule: only the run with every rule needs it.
  const options = {runOnly: only, resultTypes: ["violations"], preload: !rules};
  window.__audit = new Promise((resolve) => setTimeout(resolve))
    .then(() => axe.run(document, options))
    .then((results) => results.violations.map((v) => ({
      rule: v.id, impact: v.impact, help: v.help,
      nodes: v.nodes.map((n) => ({
        target: n.target.join(" "), html: n.html.slice(0, 160), summary: n.failureSummary,
      })),
    })));
}"""
RESULT = "() => window.__audit"

# WCAG's contrast ratio for every highlighted token that shows text, against what is painted
# behind it (its ancestors' backgrounds, blended): each failing colour pair once, as a violation.
CODE_CONTRAST = """(codeTokens) => {
  /* COLOUR_HELPERS: browser_colour.py */
  const hex = ({r, g, b}) => "#" + [r, g, b]
    .map((v) => Math.round(v).toString(16).padStart(2, "0")).join("");
  const backgrounds = new Map();
  const behind = (node) => {
    if (backgrounds.has(node)) return backgrounds.get(node);
    const colour = rgba(getComputedStyle(node).backgroundColor);
    const under = colour.a >= 1 || !node.parentElement
      ? {r: 255, g: 255, b: 255, a: 1} : behind(node.parentElement);
    const painted = over(colour, under);
    backgrounds.set(node, painted);
    return painted;
  };
  const failing = new Map();
  let checked = 0;
  for (const span of document.querySelectorAll(codeTokens)) {
    if (!span.textContent.trim() || !span.checkVisibility()) continue;
    checked++;
    const style = getComputedStyle(span);
    const background = behind(span.parentElement);
    const text = over(rgba(style.color), background);
    const [light, dark] = [luminance(text), luminance(background)].sort((a, b) => b - a);
    const ratio = (light + 0.05) / (dark + 0.05);
    const key = `${hex(text)} on ${hex(background)}`;
    if (ratio < 4.5 && !failing.has(key)) {
      failing.set(key, {
        target: `${span.closest("pre").id || "pre"} span.${span.className}`,
        html: span.outerHTML.slice(0, 160),
        summary: `contrast ${ratio.toFixed(2)}:1 (${key}), 4.5:1 needed`,
      });
    }
  }
  return {checked, nodes: [...failing.values()]};
}""".replace(COLOUR_MARK, COLOUR_HELPERS)


@cache
def source() -> str:
    if not AXE.is_file():
        raise AssertionError(
            f"{AXE.relative_to(ROOT)} is missing: `make setup` (or `npm ci`) installs axe-core "
            "from package-lock.json"
        )
    return AXE.read_text("utf8")


def pinned_version() -> str:
    return json.loads(LOCK.read_text("utf8"))["packages"]["node_modules/axe-core"]["version"]


def start(page: Page, *, every_rule: bool) -> None:
    """Inject axe-core (once per page load) and start auditing the page: with every rule, or
    with the rules that depend on colour."""
    if not page.evaluate("typeof window.axe === 'object'"):
        page.add_script_tag(content=source())
    rules = None if every_rule else COLOUR_RULES
    page.evaluate(START, {"tags": TAGS, "rules": rules, "codeTokens": CODE_TOKENS})


def result(page: Page) -> list[dict]:
    """The audit's violations, and the code tokens' contrast as one more rule."""
    violations = [v for v in page.evaluate(RESULT) if v["rule"] not in ACCEPTED]
    code = page.evaluate(CODE_CONTRAST, CODE_TOKENS)
    if code["nodes"]:
        violations.append(
            {
                "rule": "color-contrast (code tokens, checked here)",
                "impact": "serious",
                "help": "Highlighted code must have a contrast ratio of at least 4.5:1",
                "nodes": code["nodes"],
            }
        )
    return violations


def describe(where: str, violations: list[dict], nodes_shown: int = 3) -> str:
    """One line per rule (its impact and what it asks), then the elements that break it."""
    lines = [f"{where}: {len(violations)} axe-core rule(s) broken"]
    for v in violations:
        lines.append(f"- {v['rule']} ({v['impact']}): {v['help']} [{len(v['nodes'])} element(s)]")
        for node in v["nodes"][:nodes_shown]:
            summary = " ".join(node["summary"].split())
            lines.append(f"    {node['target']}\n      {node['html']}\n      {summary}")
        if len(v["nodes"]) > nodes_shown:
            lines.append(f"    ... and {len(v['nodes']) - nodes_shown} more")
    return "\n".join(lines)
