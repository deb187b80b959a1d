/* The course's JupyterLab additions (issue 30), loaded by `python -m coursetools.workspace lab`
 * (coursetools.workspace.lab_command: --LabApp.extra_labextensions_path=coursetools/lab_config/labextensions).
 *
 * 1. Style: a cell's text output keeps its lines, as in the book. JupyterLab wraps them
 *    (`white-space: pre-wrap; word-break: break-all`), which breaks a text table's columns and cuts
 *    words in two; here a line wider than the output scrolls inside the output's own box. Text that a
 *    widget prints (its Output area) keeps JupyterLab's wrapping.
 * 2. Alt text: JupyterLab draws an image/png output as an <img> without alt text, and has no way to
 *    give it one. The book takes each figure's description from its cell's metadata
 *    (`mystnb.image.alt`); this plugin gives the same description to the figure in JupyterLab, and to
 *    a widget's figure the description of the chapter's figure above it (as the book does).
 *
 * It is written by hand as the container JupyterLab's loader expects of a prebuilt ("federated")
 * extension: the script defines window._JUPYTERLAB[name] with init(shareScope) and get(module), and
 * get('./extension')() returns the plugins, get('./style')() applies the style. It imports nothing
 * from JupyterLab (so it shares no module and needs no build); it reads cells through the app's shell.
 * tests/test_jupyterlab.py checks both effects on the chapters as JupyterLab draws them.
 */
(function () {
  "use strict";
  var NAME = "transformer-course-lab";

  var CSS = [
    ".jp-Cell-outputArea > .jp-OutputArea-child > .jp-OutputArea-output > pre {",
    "  white-space: pre;",
    "  word-break: normal;",
    "  overflow-wrap: normal;",
    "  overflow-x: auto;",
    "}"
  ].join("\n");

  function applyStyle() {
    if (document.getElementById(NAME + "-style")) return;
    var style = document.createElement("style");
    style.id = NAME + "-style";
    style.textContent = CSS;
    document.head.appendChild(style);
  }

  var WIDGET_FIGURE = "The widget's figure at the settings chosen above";
  var NO_DESCRIPTION = "A figure drawn by this cell (the cell's metadata has no description of it).";

  function describedAlt(cell) {
    var model = cell && cell.model;
    if (!model) return "";
    var mystnb = model.getMetadata ? model.getMetadata("mystnb") : null;
    var alt = mystnb && mystnb.image && mystnb.image.alt;
    return typeof alt === "string" ? alt.trim() : "";
  }

  // The notebook cells JupyterLab shows, in order, from every notebook in the main area.
  function notebookCells(app) {
    var cells = [];
    var widgets = app.shell.widgets("main");
    for (var it = widgets.next(); it && !it.done; it = widgets.next()) {
      var panel = it.value;
      var content = panel && panel.content;
      if (content && content.widgets && content.node) cells.push(content.widgets);
    }
    return cells;
  }

  function describe(app) {
    var images = document.querySelectorAll(".jp-OutputArea-output img:not([alt])");
    if (!images.length) return;
    var notebooks = notebookCells(app);
    images.forEach(function (img) {
      var alt = "";
      var inWidget = !!img.closest(".jupyter-widgets, .widget-output");
      notebooks.forEach(function (cells) {
        for (var i = 0; i < cells.length && !alt; i++) {
          if (!cells[i].node.contains(img)) continue;
          if (!inWidget) {
            alt = describedAlt(cells[i]);
          } else {
            var previous = "";  // the nearest described figure at or above the widget's cell
            for (var j = i; j >= 0 && !previous; j--) previous = describedAlt(cells[j]);
            alt = previous ? WIDGET_FIGURE + " (at its first settings, as in the figure above: " + previous + ")"
                           : WIDGET_FIGURE + ".";
          }
        }
      });
      img.setAttribute("alt", alt || (inWidget ? WIDGET_FIGURE + "." : NO_DESCRIPTION));
    });
  }

  var altTextPlugin = {
    id: NAME + ":alt-text",
    description: "Gives each figure in a notebook the description in its cell's metadata as alt text.",
    autoStart: true,
    activate: function (app) {
      var pending = false;
      new MutationObserver(function () {
        if (pending) return;
        pending = true;
        Promise.resolve().then(function () { pending = false; describe(app); });
      }).observe(document.body, { childList: true, subtree: true });
    }
  };

  var modules = {
    "./extension": function () { return { __esModule: true, "default": [altTextPlugin] }; },
    "./style": function () { applyStyle(); return { __esModule: true }; }
  };

  window._JUPYTERLAB = window._JUPYTERLAB || {};
  window._JUPYTERLAB[NAME] = {
    init: function () { return Promise.resolve(); },  // it shares no module and needs none
    get: function (module) {
      var factory = modules[module];
      return factory ? Promise.resolve(factory) : Promise.reject(new Error(NAME + " has no module " + module));
    }
  };
})();
