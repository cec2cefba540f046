// Readable by everyone: what the theme's own markup leaves to a script.
//
// - A table wider than the page scrolls sideways inside its wrapper; a keyboard can only
//   scroll it if the wrapper takes focus, and a screen reader needs to hear what it is.
//   (Material already makes a code block that scrolls focusable.)
// - Material puts each code block's copy button in its own <nav>: one unnamed navigation
//   landmark per block. A single button is not a way around the site, so it is no landmark.
// - Escape closes the search, but focus stayed on a result that was no longer shown; it now
//   leaves the search, as it does when Escape is pressed in the search box (focusing the box
//   would open the search again).
(function () {
  "use strict";

  function nearestHeading(element) {
    for (let node = element; node && node !== document.body; node = node.parentElement) {
      for (let before = node.previousElementSibling; before; before = before.previousElementSibling) {
        if (/^H[1-6]$/.test(before.tagName)) {
          const copy = before.cloneNode(true);
          copy.querySelectorAll(".headerlink").forEach((link) => link.remove());
          return copy.textContent.trim();
        }
      }
    }
    return "";
  }

  function markScrolling(wrap) {
    if (wrap.scrollWidth > wrap.clientWidth + 1) {
      if (!wrap.hasAttribute("tabindex")) {
        const heading = nearestHeading(wrap);
        wrap.setAttribute("tabindex", "0");
        wrap.setAttribute("role", "region");
        wrap.setAttribute(
          "aria-label",
          heading ? `Table under “${heading}”, scrolls sideways` : "Table, scrolls sideways"
        );
      }
    } else if (wrap.getAttribute("role") === "region") {
      wrap.removeAttribute("tabindex");
      wrap.removeAttribute("role");
      wrap.removeAttribute("aria-label");
    }
  }

  const resized = new ResizeObserver((entries) => {
    entries.forEach((entry) => markScrolling(entry.target));
  });

  function mount() {
    document.querySelectorAll(".md-typeset__scrollwrap").forEach((wrap) => {
      markScrolling(wrap);
      resized.observe(wrap);
    });
    document.querySelectorAll("nav.md-code__nav").forEach((nav) => {
      nav.setAttribute("role", "none");
    });
  }

  function focusBackOnClose(event) {
    const search = document.querySelector(".md-search");
    const toggle = document.getElementById("__search");
    if (event.key !== "Escape" || !search || !toggle || !search.contains(event.target)) return;
    // Once the theme's own handler has closed the search (a frame or two later).
    let frames = 30;
    const check = () => {
      const active = document.activeElement;
      if (toggle.checked) {
        if (frames-- > 0) requestAnimationFrame(check);
      } else if (search.contains(active) && !active.checkVisibility({visibilityProperty: true})) {
        active.blur();
      }
    };
    requestAnimationFrame(check);
  }

  document.addEventListener("keydown", focusBackOnClose);

  // Material mounts its components when document$ emits (on load and after instant
  // navigation); this script comes after the theme's, so it runs after they are mounted.
  if (window.document$) {
    window.document$.subscribe(mount);
  } else {
    document.addEventListener("DOMContentLoaded", mount);
  }
})();
