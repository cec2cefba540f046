"""WCAG colour arithmetic in JavaScript, shared by the page audit and the focus walk: parse a
CSS colour, blend one colour over another, and take a colour's relative luminance."""

COLOUR_HELPERS = """\
  const rgba = (text) => {
    const [r, g, b, a = 1] = text.match(/[\\d.]+/g).map(Number);
    return {r, g, b, a};
  };
  const over = (top, under) => ({
    r: top.r * top.a + under.r * (1 - top.a),
    g: top.g * top.a + under.g * (1 - top.a),
    b: top.b * top.a + under.b * (1 - top.a),
    a: 1,
  });
  const luminance = ({r, g, b}) => {
    const f = (v) => (v /= 255) <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
"""

# where a script takes the helpers in
COLOUR_MARK = "  /* COLOUR_HELPERS: browser_colour.py */\n"
