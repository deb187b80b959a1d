"""Sphinx extension: serve MathJax 3, Mermaid and the ipywidgets HTML manager from the book itself.

By default the book would load all three from CDNs. This extension copies them from node_modules/
(installed by `npm ci` from package.json and package-lock.json) into book/static/offline/, which
_config.yml lists in html_static_path, and points MathJax, sphinxcontrib-mermaid and myst-nb at
the local copies, so the built HTML requests nothing from another host. The folder is deliberately
not called `_static`: Jupyter Book 1 injects every .js file under `_static` into every page.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.errors import ExtensionError

ROOT = Path(__file__).resolve().parent.parent
NODE_MODULES = ROOT / "node_modules"
VENDOR = ROOT / "book" / "static" / "offline"

# (source under node_modules, destination under offline/)
ASSETS = [
    ("mathjax/es5", "mathjax"),
    # The classic (non-module) build: Chromium refuses ES modules from file://, so the book opened
    # from disk would show the diagrams' source (issue 19). book/course_book.py loads it.
    ("mermaid/dist/mermaid.min.js", "mermaid/mermaid.min.js"),
    ("@jupyter-widgets/html-manager/dist", "html-manager"),
]
# Copies made by earlier versions of this extension (the ES-module build of Mermaid).
STALE = ["mermaid/mermaid.esm.min.mjs", "mermaid/chunks"]
# The widget manager's CSS imports a web font from Google; the system monospace font is fine.
REMOTE_IMPORT = re.compile(rb"@import\s+url\((?:\\?[\"'])?https?://[^)]*\);?")
# The widget manager validates the saved widget state with Ajv, built with no options: in Ajv's default
# strict mode the widget-state schema's union types log "strict mode: use allowUnionTypes ..." to the
# console of every page with a widget (issue 30 review). The schema is the widget project's own and
# valid JSON Schema, so the manager's Ajv is given the option Ajv names.
AJV_NO_OPTIONS = re.compile(rb"(\w+)=new\((\w+)\(\)\),(\w+)=\1\.compile\(")
AJV_WITH_UNION_TYPES = rb"\1=new(\2())({allowUnionTypes:true}),\3=\1.compile("


def _copy_assets() -> None:
    missing = [src for src, _ in ASSETS if not (NODE_MODULES / src).exists()]
    if missing:
        raise ExtensionError(
            f"book assets missing from node_modules ({', '.join(missing)}): run `npm ci` first"
        )
    for stale in STALE:
        path = VENDOR / stale
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    for src, dst in ASSETS:
        source, target = NODE_MODULES / src, VENDOR / dst
        if target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target)
        else:
            shutil.copy2(source, target)
    for script in (VENDOR / "html-manager").glob("*.js"):
        data = script.read_bytes()
        cleaned, patched = AJV_NO_OPTIONS.subn(AJV_WITH_UNION_TYPES, REMOTE_IMPORT.sub(b"", data))
        if script.name == "embed.js" and patched != 1 and b"allowUnionTypes:true" not in cleaned:
            raise ExtensionError(f"{script}: the widget manager's Ajv is no longer built as this extension expects "
                                 "(new(X()),Y=Ajv.compile(...)): update AJV_NO_OPTIONS in book/offline_assets.py")
        if cleaned != data:
            script.write_bytes(cleaned)


def _configure(app: Sphinx, config) -> None:
    _copy_assets()
    config.mathjax_path = "offline/mathjax/tex-chtml.js"
    config.mermaid_use_local = "offline/mermaid/mermaid.min.js"  # (its loader is replaced)
    config.mermaid_include_elk = False
    config.mermaid_include_zenuml = False
    # embed.js bundles the built-in widget models and needs no RequireJS. (embed-amd.js would need
    # RequireJS, whose global `define` breaks the UMD code inside Mermaid's ES modules.)
    config.nb_ipywidgets_js = {"offline/html-manager/embed.js": {}}


def setup(app: Sphinx) -> dict:
    app.connect("config-inited", _configure, priority=100)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
