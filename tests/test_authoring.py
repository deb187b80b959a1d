"""The text form of a notebook round-trips: sources, cell ids and the metadata the course uses."""

import pytest
from course_paths import SOLUTIONS

from coursetools import authoring, notebooks


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.name)
def test_text_form_round_trips_every_solution(path):
    original = notebooks.read(path)
    again = authoring.from_text(authoring.to_text(original), path.name)
    assert len(again.cells) == len(original.cells)
    for new, old in zip(again.cells, original.cells):
        assert (new.cell_type, new.id, new.source) == (old.cell_type, old.id, old.source)
        assert new.metadata == old.metadata  # nbgrader flags, tags, alt text: what release and grading use
