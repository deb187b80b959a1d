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

Markdown is written as it is (no comment prefix). ``kind``, ``grade_id`` and ``points`` become
nbgrader metadata; ``alt`` becomes the figure's alt text in the book (``mystnb.image.alt``).
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

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
    if grading.get("solution"):
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
    if attrs.get("kind") == "solution":
        meta["nbgrader"] = {"grade": False, "grade_id": attrs["grade_id"], "locked": False,
                            "schema_version": 3, "solution": True, "task": False}
    elif attrs.get("kind") == "tests":
        meta["nbgrader"] = {"grade": True, "grade_id": attrs["grade_id"], "locked": True,
                            "points": attrs["points"], "schema_version": 3, "solution": False, "task": False}
    return meta


def from_text(text: str, name: str) -> nbformat.NotebookNode:
    """Build a notebook from the text form; cells without an id get a deterministic one."""
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
    nbformat.validate(nb)
    return nb


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    if len(args) == 2 and args[0] == "to-text":
        sys.stdout.write(to_text(nbformat.read(args[1], as_version=4)))
        return 0
    if len(args) == 3 and args[0] == "from-text":
        target = Path(args[2])
        nb = from_text(Path(args[1]).read_text(encoding="utf-8"), target.name)
        target.write_text(nbformat.writes(nb) + "\n", encoding="utf-8")
        print(f"wrote {target} ({len(nb.cells)} cells); now run python -m coursetools.release --execute-solutions "
              f"{target.name[:2]}")
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
