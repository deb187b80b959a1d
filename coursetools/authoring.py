"""Edit a solutions notebook as plain text, and turn the text back into the notebook.

    python -m coursetools.authoring to-text solutions/03_scaled_dot_product_attention.ipynb > /tmp/03.py
    (edit /tmp/03.py in any editor)
    python -m coursetools.authoring from-text /tmp/03.py solutions/03_scaled_dot_product_attention.ipynb
    python -m coursetools.release --execute-solutions 03

The notebook stays the source; the text form is a convenience for long edits. Each cell starts with
a header line:

    # %% [markdown]
    # %% id=1a2b3c4d tags=["nbval-ignore-output"] alt="figure description"
    # %% id=... kind="solution" grade_id="ex03_1"
    # %% id=... kind="tests" grade_id="ex03_1_check" points=2
    # %% [markdown] id=... kind="manual" grade_id="ex03_7" points=3     (an explain answer, graded by hand)

Markdown is written as it is (no comment prefix). ``kind``, ``grade_id`` and ``points`` become
nbgrader metadata; ``alt`` becomes the figure's alt text in the book (``mystnb.image.alt``).

``from-text`` into an existing notebook keeps what the text form does not show: the outputs and
execution counts of every cell whose source is unchanged, other cell metadata, and the notebook's
metadata (kernel, widget state). An unedited round trip therefore leaves the file byte for byte as it
was; an edited code cell loses its (now stale) outputs until the notebook is run again.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from coursetools import notebooks

HEADER = re.compile(r"^# %%(.*)$")
ATTRIBUTE = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\[[^\]]*\]|\S+)')
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


def _header(cell: nbformat.NotebookNode) -> str:
    parts = ["# %%"]
    if cell.cell_type == "markdown":
        parts.append("[markdown]")
    if cell.get("id"):
        parts.append(f"id={json.dumps(cell.id)}")
    meta = cell.get("metadata", {})
    if meta.get("tags"):
        parts.append(f"tags={json.dumps(meta['tags'])}")
    alt = meta.get("mystnb", {}).get("image", {}).get("alt")
    if alt:
        parts.append(f"alt={json.dumps(alt, ensure_ascii=False)}")
    grading = meta.get("nbgrader", {})
    if grading.get("solution") and grading.get("grade"):
        parts.append(f'kind="manual" grade_id="{grading["grade_id"]}" points={grading["points"]:g}')
    elif grading.get("solution"):
        parts.append(f'kind="solution" grade_id="{grading["grade_id"]}"')
    elif grading.get("grade"):
        parts.append(f'kind="tests" grade_id="{grading["grade_id"]}" points={grading["points"]:g}')
    return " ".join(parts)


def to_text(nb: nbformat.NotebookNode) -> str:
    return "\n\n".join(f"{_header(cell)}\n{cell.source}" for cell in nb.cells) + "\n"


def _metadata(attrs: dict) -> dict:
    meta: dict = {}
    if "tags" in attrs:
        meta["tags"] = attrs["tags"]
    if "alt" in attrs:
        meta["mystnb"] = {"image": {"alt": attrs["alt"]}}
    if attrs.get("kind") == "manual":
        meta["nbgrader"] = {"grade": True, "grade_id": attrs["grade_id"], "locked": False,
                            "points": attrs["points"], "schema_version": 3, "solution": True, "task": False}
    elif attrs.get("kind") == "solution":
        meta["nbgrader"] = {"grade": False, "grade_id": attrs["grade_id"], "locked": False,
                            "schema_version": 3, "solution": True, "task": False}
    elif attrs.get("kind") == "tests":
        meta["nbgrader"] = {"grade": True, "grade_id": attrs["grade_id"], "locked": True,
                            "points": attrs["points"], "schema_version": 3, "solution": False, "task": False}
    return meta


TEXT_METADATA = ("tags", "nbgrader")  # cell metadata the header line states in full


def _merge(cell: nbformat.NotebookNode, old: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """``cell`` (from the text) with what the text form does not carry taken from ``old``."""
    if old.cell_type != cell.cell_type:
        return cell
    meta = {k: v for k, v in old.get("metadata", {}).items() if k not in TEXT_METADATA}
    alt = cell.metadata.get("mystnb", {}).get("image", {}).get("alt")
    image = {k: v for k, v in meta.get("mystnb", {}).get("image", {}).items() if k != "alt"}
    mystnb = {k: v for k, v in meta.get("mystnb", {}).items() if k != "image"}
    if alt or image:
        mystnb["image"] = {**image, **({"alt": alt} if alt else {})}
    meta.pop("mystnb", None)
    if mystnb:
        meta["mystnb"] = mystnb
    meta.update({k: cell.metadata[k] for k in TEXT_METADATA if k in cell.metadata})
    merged = copy.deepcopy(old)
    merged.metadata = meta
    if merged.source != cell.source:
        merged.source = cell.source
        if merged.cell_type == "code":
            merged.outputs, merged.execution_count = [], None
    return merged


def from_text(text: str, name: str, previous: nbformat.NotebookNode | None = None) -> nbformat.NotebookNode:
    """Build a notebook from the text form; cells without an id get a deterministic one.

    ``previous``: the notebook being edited. Cells are matched to its cells by id, and keep their
    outputs (when their source is unchanged) and the metadata the text form does not show; the
    notebook keeps its metadata (kernel, language, widget state).
    """
    cells, header, body = [], None, []

    def flush() -> None:
        if header is None:
            return
        attrs = {}
        for key, value in ATTRIBUTE.findall(header):
            attrs[key] = json.loads(value) if value[0] in '"[' else (int(value) if value.isdigit() else value)
        source = "\n".join(body).strip("\n")
        cell = new_markdown_cell(source) if "[markdown]" in header else new_code_cell(source)
        cell.id = str(attrs.get("id") or hashlib.sha1(f"{name}-{len(cells)}".encode()).hexdigest()[:8])
        cell.metadata = _metadata(attrs)
        cells.append(cell)

    for line in text.split("\n"):
        match = HEADER.match(line)
        if match:
            flush()
            header, body = match.group(1), []
        else:
            body.append(line)
    flush()
    nb = new_notebook()
    nb.cells = cells
    nb.metadata = {"kernelspec": KERNELSPEC, "language_info": {"name": "python", "pygments_lexer": "ipython3"}}
    if previous is not None:
        old_cells = {c.get("id"): c for c in previous.cells}
        nb.cells = [_merge(c, old_cells[c.id]) if c.id in old_cells else c for c in cells]
        nb.metadata = copy.deepcopy(previous.metadata)
        nb.nbformat, nb.nbformat_minor = previous.nbformat, previous.nbformat_minor
    nbformat.validate(nb)
    return nb


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    if len(args) == 2 and args[0] == "to-text":
        sys.stdout.write(to_text(nbformat.read(args[1], as_version=4)))
        return 0
    if len(args) == 3 and args[0] == "from-text":
        source, target = Path(args[1]), Path(args[2])
        if not source.is_file():
            print(f"error: from-text: {source} is not a file", file=sys.stderr)
            return 2
        previous = nbformat.read(str(target), as_version=4) if target.exists() else None
        nb = from_text(source.read_text(encoding="utf-8"), target.name, previous)
        if not notebooks.write(nb, target):
            print(f"{target}: unchanged")
            return 0
        print(f"wrote {target} ({len(nb.cells)} cells); now run python -m coursetools.release --execute-solutions "
              f"{target.name[:2]}")
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
