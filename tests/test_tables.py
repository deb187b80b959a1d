"""utils.tables: the Markdown tables that replace chapter 8's printed text tables (issue 30.3)."""

import pytest

from utils.tables import markdown_table


def test_a_table_is_markdown_with_escaped_cells_and_aligned_text():
    table = markdown_table(["n", "layer", "a|b"], [[16, "RNN", "8,192"], [1024, "self-attention", "1,048,576"]])
    assert table._repr_markdown_().split("\n") == [
        "| n | layer | a\\|b |", "| :-- | --: | --: |", "| 16 | RNN | 8,192 |", "| 1024 | self-attention | 1,048,576 |"]
    assert repr(table).split("\n") == [
        "n              layer        a|b", "16               RNN      8,192", "1024  self-attention  1,048,576"]


def test_markup_in_a_cell_is_shown_as_written():
    """Chapter 12's date formats read `<day-th> of <month>`: unescaped, Markdown would take them for HTML tags."""
    from markdown_it import MarkdownIt
    from mdit_py_plugins.dollarmath import dollarmath_plugin

    text = "the <day-th> of <month> | $1$ a_b_c *d* [e] `f` ~g~ \\"
    markdown = markdown_table(["format"], [[text]])._repr_markdown_()
    html = MarkdownIt("commonmark").enable("table").use(dollarmath_plugin).render(markdown)
    assert "<td style=\"text-align:left\">the &lt;day-th&gt; of &lt;month&gt; | $1$ a_b_c *d* [e] `f` ~g~ \\</td>" in html


@pytest.mark.parametrize(("args", "error", "words"), [
    (("n", [[1]]), TypeError, "header must be a non-empty list"),
    (([], []), TypeError, "header must be a non-empty list"),
    ((["a"], "rows"), TypeError, "rows must be a list of rows"),
    ((["a", "b"], [[1, 2], [3]]), ValueError, "rows[1] must have 2 cells"),
    ((["a", "b"], [[1, 2]], "lx"), ValueError, "align must be 2 letters"),
])
def test_a_malformed_table_is_refused_with_what_to_change(args, error, words):
    with pytest.raises(error) as raised:
        markdown_table(*args)
    assert words in str(raised.value)
