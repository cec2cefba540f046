"""Where keyboard focus is, and whether a reader can see it.

`FOCUS` describes the focused element once its transitions have ended (the skip link and the
heading anchors fade in when focused): whether it is drawn, and its focus ring — the outline,
its width, and its contrast with what is drawn under it (WCAG's 3:1 for a focus indicator).
A visually hidden radio button (the light/dark toggle) shows its focus on the label drawn
beside it.
"""

from __future__ import annotations

from browser_colour import COLOUR_HELPERS, COLOUR_MARK

FOCUS = """async () => {
  // What focus sets off (the search opening, say) starts within a frame or two.
  await new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)));
  const element = document.activeElement;
  if (!element || element === document.body || element === document.documentElement) {
    return {left: true};
  }
  // Let the element and what holds it finish appearing: fading in, sliding in, the search
  // box turning the page's colour.
  const appearing = ["opacity", "visibility", "transform", "background-color"];
  const around = [...element.parentElement.children];
  for (let node = element.parentElement; node; node = node.parentElement) around.push(node);
  const moving = around.flatMap((e) => e.getAnimations())
    .filter((a) => !a.transitionProperty || appearing.includes(a.transitionProperty))
    .map((a) => a.finished.catch(() => null));
  await Promise.race([Promise.all(moving), new Promise((resolve) => setTimeout(resolve, 600))]);
  /* COLOUR_HELPERS: browser_colour.py */
  // What is painted behind `node`: its background and its ancestors', blended, on white.
  const behind = (node) => {
    const layers = [];
    for (; node; node = node.parentElement) {
      const colour = rgba(getComputedStyle(node).backgroundColor);
      if (colour.a > 0) layers.push(colour);
      if (colour.a >= 1) break;
    }
    const white = {r: 255, g: 255, b: 255, a: 1};
    return layers.reverse().reduce((under, top) => over(top, under), white);
  };
  let shown = element;
  const box = element.getBoundingClientRect();
  if (element.matches("input") && (!box.width || !box.height)) {
    const labels = [...element.parentElement.querySelectorAll("label")];
    shown = labels.find((label) => label.checkVisibility()) || element;
  }
  const style = getComputedStyle(shown);
  const rect = shown.getBoundingClientRect();
  const ring = rgba(style.outlineColor);
  const offset = parseFloat(style.outlineOffset) || 0;
  // An inner ring lies on the element; an outer one on whatever is drawn just beside it
  // (the skip link, say, appears over the header, not over its parent).
  let under = shown;
  if (offset >= 0) {
    const x = rect.left - offset - parseFloat(style.outlineWidth) / 2;
    const y = rect.top + rect.height / 2;
    const beside = x >= 0 && y >= 0 && y < innerHeight
      ? document.elementsFromPoint(x, y).find((e) => e !== shown && !shown.contains(e))
      : null;
    under = beside || shown.parentElement;
  }
  const background = behind(under);
  const [light, dark] = [luminance(ring), luminance(background)].sort((a, b) => b - a);
  const name = (element.getAttribute("aria-label") || element.title || element.textContent || "")
    .trim().replace(/\\s+/g, " ").slice(0, 40);
  return {
    left: false,
    element: `${element.tagName.toLowerCase()}${element.className ? "." +
      String(element.className).trim().split(/\\s+/).join(".") : ""} "${name}"`,
    drawn: shown.checkVisibility({opacityProperty: true, visibilityProperty: true}) &&
      rect.width > 0 && rect.height > 0,
    inView: rect.bottom > 0 && rect.right > 0 && rect.top < innerHeight && rect.left < innerWidth,
    outline: style.outlineStyle === "none" ? 0 : parseFloat(style.outlineWidth),
    contrast: ring.a ? (light + 0.05) / (dark + 0.05) : 0,
    copy: element.matches('button[data-md-type="copy"]'),
    skip: element.matches(".md-skip"),
  };
}""".replace(COLOUR_MARK, COLOUR_HELPERS)


def problem(stop: dict) -> str | None:
    """What is wrong with the focus at one stop of the walk, if anything."""
    if not stop["drawn"]:
        return "is focused but not drawn"
    if not stop["inView"]:
        return "is focused outside the window"
    if stop["outline"] < 2:
        return f"has no focus ring (outline {stop['outline']}px)"
    if stop["contrast"] < 3:
        return f"has a focus ring at {stop['contrast']:.2f}:1 against its background (< 3:1)"
    return None
