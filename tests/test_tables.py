"""utils.tables: the Markdown tables that replace chapter 8's printed text tables (issue 30.3)."""

import pytest

from utils.tables import markdown_table


def test_a_table_is_markdown_with_escaped_cells_and_aligned_text():
    table = markdown_table(["n", "layer", "a|b"], [[16, "RNN", "8,192"], [1024, "self-attention", "1,048,576"]])
    assert table._repr_markdown_().split("\n") == [
        "| n | layer | a\\|b |", "| :-- | --: | --: |", "| 16 | RNN | 8,192 |", "| 1024 | self-attention | 1,048,576 |"]
    assert repr(table).split("\n") == [
        "n              layer        a|b", "16               RNN      8,192", "1024  self-attention  1,048,576"]


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
