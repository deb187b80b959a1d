"""A chapter's stated study time adds up: the text's minutes plus its exercises' minutes, each exercise's
time read from its own heading (review of chapters 01-06, findings 01-T1, 02-T2, 03-T3, 04-T3, 05-T3,
06-T2: the stated times had left out most of the exercises)."""

from __future__ import annotations

import json
import re

import pytest
from course_paths import ROOT

NUMBER_WORDS = {"six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}
# The chapters the review covered, and chapter 13 (issue 28: its time had left out the exercises); chapters 07-12
# state their times in other forms.
REVIEWED = sorted([*(ROOT / "solutions").glob("0[1-6]_*.ipynb"), *(ROOT / "solutions").glob("13_*.ipynb")])


def _markdown(path) -> str:
    cells = json.loads(path.read_text())["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


def _hours_minutes(text: str) -> float:
    text = text.replace("¼", ".25").replace("½", ".5").replace("¾", ".75")
    hours = re.match(r"([\d.]+) hours?(?: ([\d.]+) minutes)?$", text.strip())
    assert hours, f"no 'N hours [M minutes]' in {text!r}"
    return float(hours.group(1)) * 60 + float(hours.group(2) or 0)


def study_time(text: str) -> tuple[float, int, int, int]:
    """(total, text, exercises, number of exercises), as the chapter's '*Time:*' line states them."""
    flat = " ".join(text.split())
    line = re.search(r"\*Time:\* about ([^:]+): about (\d+) minutes [^,]+, and (\d+) minutes for the (\w+) exercises", flat)
    assert line, "no '*Time:* about T: about A minutes ..., and B minutes for the N exercises' line"
    total, reading, exercises, count = line.groups()
    return _hours_minutes(total), int(reading), int(exercises), NUMBER_WORDS[count]


def heading_minutes(text: str) -> list[int]:
    """The minutes in every exercise heading: '### Exercise 1.3 — ... (derive, ★, about 10 minutes, 2 points)' (or
    '15 min', as chapter 13 writes them)."""
    headings = re.findall(r"^### Exercise \d+\.\d+\b.*$", text, re.M)
    minutes = [re.search(r"\(([^()]*?)(\d+) min(?:utes)?\b", h) for h in headings]
    assert all(minutes), [h for h, m in zip(headings, minutes) if not m]
    return [int(m.group(2)) for m in minutes]


@pytest.mark.parametrize("path", REVIEWED, ids=lambda p: p.name[:2])
def test_the_stated_study_time_includes_every_exercise(path):
    text = _markdown(path)
    total, reading, exercises, count = study_time(text)
    minutes = heading_minutes(text)
    assert len(minutes) == count, f"{path.name}: the time line counts {count} exercises, the headings {len(minutes)}"
    assert sum(minutes) == exercises, f"{path.name}: the headings add up to {sum(minutes)} minutes, the time line says {exercises}"
    assert reading + exercises == total, f"{path.name}: {reading} + {exercises} minutes is not 'about {total:g} minutes'"


def test_the_time_rule_fails_on_the_reviewed_wording():
    """The wording the review found (chapter 06: 'about 75 minutes with the exercises', 125 minutes of them)."""
    old = ("*Time:* about 75 minutes with the exercises.\n"
           "### Exercise 6.1 — x (implement, ★, 10 minutes, 2 points)\n### Exercise 6.3 — y (implement, ★★★, 40 minutes, 4 points)")
    with pytest.raises(AssertionError):
        study_time(old)
    short = ("*Time:* about 2 hours: about 40 minutes for the text, and 75 minutes for the six exercises.\n"
             + "\n".join(f"### Exercise 2.{i} — x (implement, ★, about 15 minutes, 2 points)" for i in range(1, 7)))
    total, reading, exercises, count = study_time(short)
    assert (total, reading, exercises, count) == (120, 40, 75, 6)
    assert sum(heading_minutes(short)) == 90 != exercises  # the rule above would fail on this chapter
