"""Benchmarks are safe to run (issue 19.4): an unrecorded run changes no tracked file."""

from __future__ import annotations

import hashlib
import subprocess

import pytest
from course_paths import ROOT

from benchmarks import report, run

TRACKED = ["performance.md", "benchmarks/results", "benchmarks/figures"]


def _fingerprint() -> dict[str, str]:
    files = [p for name in TRACKED for p in sorted((ROOT / name).rglob("*") if (ROOT / name).is_dir() else [ROOT / name])
             if p.is_file()]
    return {str(p.relative_to(ROOT)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def test_a_run_without_record_writes_only_to_its_own_folder(tmp_path, capsys):
    before = _fingerprint()
    assert run.main(["--quick", "--only", "tiled", "--out", str(tmp_path)]) == 0
    assert _fingerprint() == before, "an unrecorded run changed a tracked file"
    assert (tmp_path / "results" / "tiled.json").exists()
    page = (tmp_path / "performance.md").read_text()
    assert "Forward time of the tiled attention" in page
    assert "not recorded" in capsys.readouterr().out


def test_the_default_output_folder_is_git_ignored():
    probe = run.OUT / "results" / "x.json"
    result = subprocess.run(["git", "check-ignore", "-q", str(probe)], cwd=ROOT)
    assert result.returncode == 0, f"{run.OUT} is not git-ignored"


def test_quick_runs_cannot_be_recorded_and_steps_are_checked():
    with pytest.raises(SystemExit):
        run.main(["--quick", "--record"])
    with pytest.raises(SystemExit):
        run.main(["--only", "attention,nonsense"])


def test_a_page_elsewhere_links_its_own_figures(tmp_path):
    """The recorded results rendered into another folder link figures relative to that page."""
    page = report.write(figures=tmp_path / "figs", page=tmp_path / "page" / "performance.md")
    text = page.read_text()
    if "attention_ratios.png" in text:
        assert "```{image} ../figs/attention_ratios.png" in text and (tmp_path / "figs" / "attention_ratios.png").exists()
    assert report.render() == (ROOT / "performance.md").read_text(), "rendering alone changes nothing"


def test_a_quick_run_judges_no_target_on_the_page_as_on_the_console(tmp_path):
    """Issue 27: a quick run printed "not judged" while its performance.md marked two targets "no"."""
    import json
    import shutil

    for name in ("attention", "tiled", "memory"):
        shutil.copy(ROOT / "benchmarks" / "results" / f"{name}.json", tmp_path / f"{name}.json")
    full = report._targets(tmp_path)
    assert full and "not judged" not in "\n".join(full)
    data = json.loads((tmp_path / "tiled.json").read_text())
    (tmp_path / "tiled.json").write_text(json.dumps({**data, "quick": True}))
    rows = [line for line in report._targets(tmp_path) if line.startswith("| ") and "bound" not in line]
    assert rows and all(line.endswith("| not judged (quick run) |") for line in rows), rows
    assert report.missed_targets(tmp_path) == []


def test_the_readme_run_times_are_the_recorded_ones(tmp_path):
    """Issue 25 (P-1): README's "runs in" column quoted figures with no record (chapters 11 and 12) or other
    than the record (chapters 01-06). Every chapter row now shows its learner notebook's recorded time."""
    import json

    readme = (ROOT / "README.md").read_text()
    assert report.readme_with_run_times(readme) == readme, "README's run times differ: python -m benchmarks.report"
    recorded = json.loads((ROOT / "benchmarks" / "results" / "notebooks.json").read_text())["notebook_seconds"]
    rows = [line for line in readme.splitlines() if report._CHAPTER_ROW.match(line)]
    chapters = sorted(p.name for p in (ROOT / "chapters").glob("[0-9][0-9]_*.ipynb"))
    assert len(rows) == len(chapters), "a chapter row does not match the pattern the column is written by"
    for row, name in zip(rows, chapters):
        assert row.endswith(f"| {recorded[f'chapters/{name}']:.0f} s |"), row[-40:]
    # The rewrite can fail: a changed record changes the README.
    first = sorted(name for name in recorded if name.startswith("chapters/"))[0]
    (tmp_path / "notebooks.json").write_text(json.dumps({"notebook_seconds": {**recorded, first: recorded[first] + 7}}))
    assert report.readme_with_run_times(readme, tmp_path) != readme


def test_the_readme_grading_plan_is_the_recorded_one(tmp_path):
    """Issue 29: README's "a class of N takes about ..." was typed by hand and wrong for chapter 13 (0.11 x N
    minutes against "between 0.15 and 0.3"). It is now written from grading_throughput.json with the table, and
    a chapter graded as a class of fewer than 30 is labelled an estimate."""
    import json

    from benchmarks import grading_throughput

    readme = (ROOT / "README.md").read_text()
    assert report.readme_with_grading_plan(readme) == readme, "README's grading times differ: python -m benchmarks.report"
    assert report.GRADING_BEGIN in readme and report.GRADING_END in readme
    recorded = json.loads((ROOT / "benchmarks" / "results" / "grading_throughput.json").read_text())
    sentence = grading_throughput.plan(recorded)
    assert sentence in readme
    measured_part, _, estimated_part = sentence.partition("**estimated**")
    for chapter, rows in recorded["chapters"].items():
        two = next(r for r in rows if r["jobs"] == 2)
        start = two["wall_s"] - two["after_reference_s"]
        line = f"chapter {chapter} about {start / 60:.1f} + {two['per_notebook_s'] / 60:.2f} × N minutes"
        assert line in (measured_part if two["students"] >= 30 else estimated_part), (chapter, line)
    # a plan estimated from fewer than 30 students says so; with every chapter a measured class of 30 it says none
    all_measured = all(r["students"] >= 30 for rows in recorded["chapters"].values() for r in rows)
    assert (estimated_part == "") == all_measured, estimated_part[:200]
    # The rewrite can fail: a changed record changes the README.
    changed = json.loads(json.dumps(recorded))
    changed["chapters"]["13"][0]["per_notebook_s"] += 30
    (tmp_path / "grading_throughput.json").write_text(json.dumps(changed))
    assert report.readme_with_grading_plan(readme, tmp_path) != readme


def test_the_performance_page_s_figures_are_readable_as_the_notebooks_figures():
    """Issue 30 review: performance.html showed attention_ratios.png and attention_memory.png saved at 1x and
    80 dpi, with 8-point legends (about 9 px) and a line through the legend. They are drawn as the notebooks'
    figures (figure_png): a PNG at twice the width the page shows it at, smallest text >= MIN_TEXT_PX as shown
    in the book's column, no legend over a line, no text over text, log axes without superscripts."""
    from test_figures import png_size

    from utils.plotting import BOOK_COLUMN_PX, MIN_TEXT_PX

    page = report.render()
    drawn = report._figures["drawn"]
    assert set(drawn) == {"attention_ratios.png", "attention_memory.png"}, drawn
    for name, meta in drawn.items():
        assert f":width: {meta['width']}px" in page, f"{name}: the page does not show it at its drawn width"
        width, _ = png_size((ROOT / "benchmarks" / "figures" / name).read_bytes())
        assert abs(width - 2 * meta["width"]) <= 1, f"{name}: {width} px PNG for {meta['width']} px: run python -m benchmarks.report"
        assert meta["smallest_text_px"] * min(1.0, BOOK_COLUMN_PX / meta["width"]) >= MIN_TEXT_PX, (name, meta)
        assert meta["collisions"] == [], (name, meta)
