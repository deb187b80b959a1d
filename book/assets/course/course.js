/* The course's book script: diagrams drawn readably, and the widget manager's MathJax 2 call served
 * by MathJax 3. A classic script (no ES modules), so the book also works when opened from disk. */
(function () {
  "use strict";
  // Diagrams are drawn at their natural size and shrunk at most to this factor (node text 16 px ->
  // 12 px on screen); a diagram still wider than the column scrolls inside its own box.
  var MIN_DIAGRAM_SCALE = 0.75;
  // A display equation wider than the column is set in a smaller size, down to this factor; one
  // that is wider still scrolls inside its own box.
  var MIN_MATH_SCALE = 0.8;

  // The ipywidgets HTML manager typesets widget labels with MathJax 2's `MathJax.Hub.Queue`; the book
  // loads MathJax 3, which has no Hub. Route the call to MathJax 3 instead of raising an error.
  function mathjaxHubShim() {
    var mj = window.MathJax;
    if (!mj || mj.Hub) return;
    mj.Hub = {
      Queue: function (command) {
        var element = command && command[2];
        var ready = mj.startup && mj.startup.promise ? mj.startup.promise : Promise.resolve();
        ready.then(function () {
          if (mj.typesetPromise) return mj.typesetPromise(element ? [element] : undefined);
        }).catch(function (error) { console.warn("MathJax could not typeset a widget label:", error); });
      },
    };
  }

  // The width a diagram may take: the box's inner width (clientWidth counts its padding, and a
  // diagram sized to it overflowed ch02's column by the 32 px of padding, issue 30.2).
  function diagramRoom(pre) {
    var style = getComputedStyle(pre);
    return pre.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight) - 2;
  }

  function fitDiagram(pre) {
    var svg = pre.querySelector("svg");
    if (!svg || !svg.viewBox || !svg.viewBox.baseVal || !svg.viewBox.baseVal.width) return;
    var box = svg.viewBox.baseVal;
    var column = diagramRoom(pre);
    var scale = Math.min(1, Math.max(MIN_DIAGRAM_SCALE, column / box.width));
    svg.removeAttribute("width");
    svg.removeAttribute("height");
    svg.style.maxWidth = "none";
    svg.style.width = (box.width * scale).toFixed(1) + "px";
    svg.style.height = (box.height * scale).toFixed(1) + "px";
  }

  function tooWide(pre) {
    var svg = pre.querySelector("svg");
    var box = svg && svg.viewBox && svg.viewBox.baseVal;
    return Boolean(box && box.width * MIN_DIAGRAM_SCALE > diagramRoom(pre));
  }

  // A left-to-right flowchart too wide for the column even at MIN_DIAGRAM_SCALE is drawn top to
  // bottom instead (the same graph). JupyterLab draws it as written: a flowchart too wide for Lab's
  // column too is written top to bottom in its chapter (chapter 12's; tests/test_jupyterlab.py measures).
  var LEFT_TO_RIGHT = /^(\s*(?:flowchart|graph)\s+)(LR|RL)\b/;

  async function drawOne(pre, index) {
    var source = pre.getAttribute("data-diagram-source");
    if (source === null) {
      source = pre.textContent;
      pre.setAttribute("data-diagram-source", source);
    }
    var drawn = await window.mermaid.render("course-diagram-" + index, source);
    pre.innerHTML = drawn.svg;
    if (tooWide(pre) && LEFT_TO_RIGHT.test(source)) {
      drawn = await window.mermaid.render("course-diagram-" + index + "-tb", source.replace(LEFT_TO_RIGHT, "$1TB"));
      pre.innerHTML = drawn.svg;
      pre.setAttribute("data-diagram-direction", "TB");
    }
    pre.setAttribute("data-processed", "true");
    fitDiagram(pre);
  }

  async function drawDiagrams() {
    var diagrams = document.querySelectorAll("pre.mermaid");
    if (!diagrams.length) return;
    if (!window.mermaid) {
      console.error("the diagram library (mermaid.min.js) did not load");
      return;
    }
    window.mermaid.initialize({
      startOnLoad: false,
      theme: "default",
      securityLevel: "strict",
      flowchart: { useMaxWidth: false },
    });
    for (var i = 0; i < diagrams.length; i++) {
      try {
        await drawOne(diagrams[i], i);
      } catch (error) {
        console.error("a diagram could not be drawn:", error);
      }
    }
    window.addEventListener("resize", function () { diagrams.forEach(fitDiagram); });
  }

  function fitEquations() {
    document.querySelectorAll('mjx-container[display="true"]').forEach(function (eq) {
      // MathJax sets the container's font size (e.g. 127.3 %, to match the text's x-height): scale that.
      if (!eq.hasAttribute("data-mathjax-size")) eq.setAttribute("data-mathjax-size", eq.style.fontSize || "100%");
      var size = parseFloat(eq.getAttribute("data-mathjax-size"));
      eq.style.fontSize = size + "%";
      var ratio = eq.clientWidth / eq.scrollWidth;
      if (ratio < 1 && ratio >= MIN_MATH_SCALE) eq.style.fontSize = Math.floor(size * ratio * 10) / 10 + "%";
    });
  }

  function afterTypesetting() {
    var mj = window.MathJax;
    if (!mj || !mj.startup || !mj.startup.promise) return;
    mj.startup.promise.then(function () {
      fitEquations();
      window.addEventListener("resize", fitEquations);
    });
  }

  // The page has two "primary sidebar" toggles: the theme's navbar icon (hidden on a wide screen) and
  // the header's "Toggle primary sidebar" button. Both theme scripts bind only the first
  // (document.querySelector), so the visible button did nothing at 1366 px. Every other toggle
  // forwards its click to the first, whose handlers hide the sidebar (wide) or open it (narrow).
  function bindSidebarToggles() {
    var toggles = document.querySelectorAll(".primary-toggle");
    for (var i = 1; i < toggles.length; i++) {
      toggles[i].addEventListener("click", function (event) {
        event.preventDefault();
        event.stopPropagation();
        toggles[0].click();
      });
    }
  }

  // The widget manager draws a static widget's saved figure as an <img> without alt text. Each gets
  // one: the widget's figure is the chapter's static figure above it at the same saved settings, so
  // its description is that figure's alt text (or, without one, a plain statement of what it is).
  var WIDGET_FIGURE = "The widget's figure at its saved settings";
  function describeWidgetImages(root) {
    var images = (root || document).querySelectorAll(".jupyter-widgets img:not([alt]), .widget-output img:not([alt])");
    images.forEach(function (img) {
      var all = Array.prototype.slice.call(document.querySelectorAll("main img[alt]"));
      var before = all.filter(function (other) {
        return other !== img && other.alt && !other.closest(".jupyter-widgets") &&
          (other.compareDocumentPosition(img) & Node.DOCUMENT_POSITION_FOLLOWING);
      });
      var previous = before.length ? before[before.length - 1].alt : "";
      img.alt = previous ? WIDGET_FIGURE + ", as in the figure above: " + previous : WIDGET_FIGURE + ".";
    });
  }

  function watchWidgetImages() {
    describeWidgetImages(document);
    new MutationObserver(function () { describeWidgetImages(document); })
      .observe(document.body, { childList: true, subtree: true });
  }

  document.addEventListener("DOMContentLoaded", function () {
    bindSidebarToggles();
    watchWidgetImages();
    mathjaxHubShim();
    afterTypesetting();
    drawDiagrams();
  });
})();
