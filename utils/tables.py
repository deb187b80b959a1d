"""tables: a table of measured numbers shown as a table, in JupyterLab and in the book.

Hand-written (not generated from a chapter). A table printed as text with ``print`` keeps its columns
only while every line fits: in the book's column at 1366 px the timing tables of chapter 8 were wider
than the column, and a wrapped line or a sideways scroll loses which number belongs to which heading
(issue 30.3). ``markdown_table`` builds a Markdown table from the values a cell computed (nothing is
typed by hand): JupyterLab and the book both draw it as a table that wraps inside its cells instead.
"""

from __future__ import annotations

from collections.abc import Sequence

_ALIGN = {"l": ":--", "r": "--:", "c": ":-:"}


# Characters Markdown would read as markup: a cell's `<month>` would be an HTML tag, `$...$` maths, `a_b_c`
# emphasis, `|` the end of the cell. Each is escaped with a backslash, which every Markdown reader honours.
_MARKUP = "\\`*_<>[]|$~"


def _cell(value: object) -> str:
    """One cell's Markdown: its text on one line, with every character Markdown would read as markup escaped."""
    return "".join("\\" + c if c in _MARKUP else c for c in str(value).replace("\n", " "))


class Table:
    """A table to display: Markdown for JupyterLab and the book, aligned text where only text is shown."""

    def __init__(self, header: list[str], rows: list[list[str]], align: str) -> None:
        self.header, self.rows, self.align = header, rows, align

    def _repr_markdown_(self) -> str:
        lines = ["| " + " | ".join(_cell(h) for h in self.header) + " |",
                 "| " + " | ".join(_ALIGN[a] for a in self.align) + " |"]
        lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in self.rows]
        return "\n".join(lines)

    def __repr__(self) -> str:
        table = [self.header, *self.rows]
        widths = [max(len(row[j]) for row in table) for j in range(len(self.header))]
        pad = {"l": str.ljust, "r": str.rjust, "c": str.center}
        return "\n".join("  ".join(pad[a](cell, w) for cell, a, w in zip(row, self.align, widths)).rstrip()
                         for row in table)


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]], align: str | None = None) -> Table:
    """A Markdown table with the column headings ``header`` and one line per row of ``rows``.

    Each cell is ``str(value)`` (format numbers before passing them: ``f"{ms:.2f}"``). ``align`` has one
    letter per column, ``l``, ``r`` or ``c`` (default: the first column left, the others right, as numbers
    are read). Display the result (the last expression of a cell, or ``IPython.display.display``): it is
    shown as Markdown, and as the same table in aligned text where only text is shown (a terminal, nbval).
    """
    if isinstance(header, str) or not isinstance(header, Sequence) or not header:
        raise TypeError(f"header must be a non-empty list of column headings, got {header!r}")
    width = len(header)
    if isinstance(rows, str) or not isinstance(rows, Sequence):
        raise TypeError(f"rows must be a list of rows (each a list of {width} cells), got {type(rows).__name__}")
    for i, row in enumerate(rows):
        if isinstance(row, str) or not isinstance(row, Sequence) or len(row) != width:
            raise ValueError(f"rows[{i}] must have {width} cells, one per heading {list(header)}, got {row!r}")
    if align is None:
        align = "l" + "r" * (width - 1)
    if not isinstance(align, str) or len(align) != width or set(align) - set(_ALIGN):
        raise ValueError(f"align must be {width} letters from 'l', 'r', 'c' (one per column), got {align!r}")
    return Table([str(h) for h in header], [[str(v) for v in row] for row in rows], align)
