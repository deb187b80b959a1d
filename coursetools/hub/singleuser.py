"""A student's server, as the student: create ~/my-work/ from the course's chapters, then start
jupyterhub-singleuser there with the course's Lab settings and extension, as a learner's own
`python -m coursetools.workspace lab` has them (the hub's CourseSpawner runs this; arguments are passed on).

``~/my-work`` receives only the chapters the student does not have yet (coursetools.workspace.create):
a notebook already there is never overwritten, so a chapter added to the course later appears at the
next start and nothing a student wrote is replaced.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from coursetools import workspace


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    chapters = Path(os.environ.get("COURSE_HUB_CHAPTERS", workspace.CHAPTERS))
    work = Path.home() / "my-work"
    copied = workspace.create(work, source=chapters)
    if copied:
        print(f"coursetools.hub: copied {len(copied)} chapter(s) into {work}", file=sys.stderr, flush=True)
    os.chdir(work)
    # the learner's own Lab: the course's defaults (no news prompt) and its extension (outputs, alt text)
    command = [sys.executable, "-m", "jupyterhub.singleuser", f"--ServerApp.root_dir={work}", *workspace.LAB_OPTIONS,
               *argv]
    os.environ.update(workspace.lab_environment())
    os.execv(command[0], command)
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main())
