"""Issue 29: the course on JupyterHub for a class, and grading collected from it.

End to end, on 127.0.0.1: three throw-away Unix users; `python -m coursetools.hub serve` (as an
instructor types it); each user logged in through the hub's REST API with a token (issued with the
hub's service token), their server started, chapter 02's exercises answered right, left blank or
answered wrong and run cell by cell through that server's kernel, the notebook saved through the
server's contents API; servers stopped; `python -m coursetools.hub collect`, then
`python -m coursetools.grading`, both as argv in a subprocess; the gradebook holds exactly the rows
the three answers deserve. The hub, the proxy and every server are stopped at the end, also when the
test fails (the fixtures' finalizers), and the users are deleted.

One student also logs in through the login form with their Unix password (PAM, the hub's
authenticator), and a wrong password is refused.

The collect tests (links, an oversized file, a FIFO, a hard link, a file owned by someone else, a
user with nothing, an --out inside a home) run the same command on users made for them.

Where the hub cannot run (not root, no bubblewrap, no `npm ci`), these tests skip, saying why;
in CI (CI set) they fail instead.
"""

from __future__ import annotations

import asyncio
import csv
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from course_paths import ROOT
from grading_cases import Course, chapter_path
from hub_fixtures import Hub, create_users, delete_users, processes_of, require_hub_machine, run_cells

CHAPTER = "02"
STATES = {"a": "right", "b": "blank", "c": "wrong"}
START_TIMEOUT = 420  # a loaded 2-core machine starts JupyterLab slowly; never a verdict on speed
CELL_TIMEOUT = 300


def _names(tag: str, letters) -> list[str]:
    return [f"ct{tag}{os.getpid() % 100000}{x}" for x in letters]


@pytest.fixture(scope="module")
def class_users():
    require_hub_machine()
    names = _names("h", "abc")
    delete_users(names)  # leftovers of an earlier, killed run with the same pid
    try:
        accounts = create_users(names)
        yield dict(zip("abc", accounts))
    finally:
        delete_users(names)


@pytest.fixture(scope="module")
def hub(class_users, tmp_path_factory):
    folder = tmp_path_factory.mktemp("hub")
    running = Hub(folder / "state", [a.pw_name for a in class_users.values()], folder / "hub.log")
    try:
        running.wait_ready(START_TIMEOUT)
        yield running
    finally:
        running.stop()
        left = processes_of({a.pw_uid for a in class_users.values()})
        delete_users([a.pw_name for a in class_users.values()])
        assert not left, f"processes of the test users outlived the hub: {left}"


def _wait_for_server(hub: Hub, user: str, token: str, ready: bool) -> dict:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        model = hub.api("GET", f"/users/{user}", token=token).json()
        server = model.get("servers", {}).get("")
        if ready and server and server.get("ready"):
            return model
        if not ready and not server:
            return model
        time.sleep(1)
    raise AssertionError(f"{user}'s server did not {'start' if ready else 'stop'}:\n{hub.tail()}")


def _answered(notebook: dict, course: Course, state: str) -> dict:
    by_id = {c.get("id"): c for c in notebook["cells"]}
    for exercise in course.exercises:
        by_id[exercise.cell_id]["source"] = exercise.source(state)
    return notebook


def test_hub_serves_collects_and_grades_a_class(hub, class_users, tmp_path):
    import requests

    course = Course(chapter_path(CHAPTER))
    name = f"{course.name}.ipynb"
    # One user already has a chapter of their own in my-work/: the hub must not overwrite it.
    b = class_users["b"]
    mine = Path(b.pw_dir) / "my-work" / "09_attention_from_scratch.ipynb"
    mine.parent.mkdir()
    mine.write_text('{"a notebook": "of my own"}')
    for path in (mine.parent, mine):
        os.chown(path, b.pw_uid, b.pw_gid)

    # The production authenticator: a student logs in with their Unix password (PAM) through the login form.
    a = class_users["a"]
    password = f"pw-{os.urandom(8).hex()}"
    subprocess.run(["chpasswd"], input=f"{a.pw_name}:{password}", text=True, check=True, capture_output=True)
    for attempt, expected in ((password, 302), ("not-" + password, 403)):
        browser = requests.Session()
        form = browser.get(f"{hub.url}/hub/login", timeout=60)
        xsrf = re.search(r'name="_xsrf" value="([^"]+)"', form.text).group(1)
        login = browser.post(f"{hub.url}/hub/login", allow_redirects=False, timeout=60,
                             data={"username": a.pw_name, "password": attempt, "_xsrf": xsrf})
        assert login.status_code == expected, (attempt == password, login.status_code, login.text[:300])

    tokens = {}
    for key, account in class_users.items():
        user = account.pw_name
        reply = hub.api("POST", f"/users/{user}/tokens", json={"note": "test login", "expires_in": 3600})
        assert reply.status_code == 201, reply.text
        tokens[key] = reply.json()["token"]
        started = hub.api("POST", f"/users/{user}/server", token=tokens[key])
        assert started.status_code in (201, 202), started.text
    for key, account in class_users.items():
        _wait_for_server(hub, account.pw_name, tokens[key], ready=True)

    chapters = sorted(p.name for p in (ROOT / "chapters").glob("[0-9][0-9]_*.ipynb"))
    runs = {}
    for key, account in class_users.items():
        user, token = account.pw_name, tokens[key]
        base = f"{hub.url}/user/{user}/api"
        headers = {"Authorization": f"token {token}"}
        # The server's root folder is ~/my-work, holding every chapter, owned by the user.
        listing = requests.get(f"{base}/contents", headers=headers, timeout=60)
        assert listing.status_code == 200, listing.text
        # The student's Lab is the course's (issue 30): no news prompt, and the course's extension served
        # (text outputs keep their lines, every figure has its cell's alt text).
        lab = requests.get(f"{hub.url}/user/{user}/lab", headers=headers, timeout=60)
        config = re.search(r'id="jupyter-config-data"[^>]*>(.*?)</script>', lab.text, re.S)
        assert lab.status_code == 200 and config, (lab.status_code, lab.text[:300])
        assert json.loads(config.group(1))["news"] == {"disabled": True}
        served = {e["name"] for e in json.loads(config.group(1))["federated_extensions"]}
        assert "transformer-course-lab" in served, sorted(served)
        assert sorted(c["name"] for c in listing.json()["content"] if c["type"] == "notebook") == chapters
        assert all(p.stat().st_uid == account.pw_uid for p in Path(account.pw_dir, "my-work").iterdir())
        notebook = requests.get(f"{base}/contents/{name}", headers=headers, timeout=60).json()["content"]
        # A kernel for the notebook, as JupyterLab opens one (a session on the notebook's path).
        session = requests.post(f"{base}/sessions", headers=headers, timeout=60,
                                json={"path": name, "name": name, "type": "notebook", "kernel": {"name": "python3"}})
        assert session.status_code == 201, session.text
        ws = f"ws://127.0.0.1:{hub.port}/user/{user}/api/kernels/{session.json()['kernel']['id']}/channels"
        notebook = _answered(notebook, course, STATES[key])
        sources = [c["source"] if isinstance(c["source"], str) else "".join(c["source"])
                   for c in notebook["cells"] if c["cell_type"] == "code"]
        other_home = class_users["a" if key != "a" else "b"].pw_dir
        probe = ("import json, os, utils\n"
                 f"print(json.dumps([os.getuid(), utils.__file__, os.path.exists({str(ROOT / 'solutions')!r}), "
                 f"os.path.exists({other_home!r}), os.getcwd()]))")
        runs[key] = (base, headers, notebook, ws, [probe, *sources])

    async def run_all():  # the three students work at the same time
        return await asyncio.gather(*(run_cells(ws, tokens[key], cells, CELL_TIMEOUT)
                                      for key, (_, _, _, ws, cells) in runs.items()))

    for (key, (base, headers, notebook, _, _)), results in zip(runs.items(), asyncio.run(run_all())):
        account, state = class_users[key], STATES[key]
        uid, utils_file, sees_solutions, sees_other, cwd = json.loads(results[0]["stdout"])
        # The kernel: the course environment, as the user, importing the hub's learner copy of utils,
        # with no view of the answer key or of another student's home, in ~/my-work.
        assert uid == account.pw_uid
        assert utils_file.startswith(str(hub.state / "course" / "utils")), utils_file
        assert not sees_solutions and not sees_other
        assert cwd == str(Path(account.pw_dir) / "my-work")
        printed = "".join(r["stdout"] for r in results[1:])
        for exercise in course.automatic:
            line = next((ln for ln in printed.splitlines() if ln.startswith(f"Exercise {exercise.label}:")), "")
            if state == "right":
                # a multiple-choice prediction is recorded, never judged, by its visible check (README, "For authors")
                assert line == f"Exercise {exercise.label}: passed" or "your prediction is recorded" in line, (
                    line, [r["error"] for r in results])
            else:
                assert line and not line.endswith(": passed"), line
        saved = requests.put(f"{base}/contents/{name}", headers=headers, timeout=60,
                             json={"type": "notebook", "format": "json", "content": notebook})
        assert saved.status_code == 200, saved.text
    assert mine.read_text() == '{"a notebook": "of my own"}'

    for key, account in class_users.items():
        stopped = hub.api("DELETE", f"/users/{account.pw_name}/server", token=tokens[key])
        assert stopped.status_code in (202, 204), stopped.text
    for key, account in class_users.items():
        _wait_for_server(hub, account.pw_name, tokens[key], ready=False)
    deadline = time.monotonic() + 60
    uids = {a.pw_uid for a in class_users.values()}
    while processes_of(uids) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not processes_of(uids), "a stopped server left processes behind"

    # The instructor: collect, then grade (argv, as typed).
    users = ",".join(a.pw_name for a in class_users.values())
    subs, grades = tmp_path / "submissions", tmp_path / "grades"
    collected = subprocess.run([sys.executable, "-m", "coursetools.hub", "collect", "--users", users,
                                "--out", str(subs), "--chapters", CHAPTER],
                               cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert collected.returncode == 0, collected.stderr
    assert "every user (3) had something to hand in" in collected.stdout, collected.stdout
    assert sorted(p.name for p in subs.iterdir()) == sorted(users.split(","))
    assert all([p.name for p in (subs / u).iterdir()] == [name] for u in users.split(","))
    graded = subprocess.run([sys.executable, "-m", "coursetools.grading", str(subs), "--out", str(grades),
                             "--jobs", "2"], cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert graded.returncode == 0, graded.stdout[-3000:] + graded.stderr[-3000:]
    with open(grades / "gradebook.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    got = {(r["student"], r["exercise"]): (float(r["points"]), r["status"]) for r in rows}
    expected = {}
    for key, account in class_users.items():
        for label, (points, statuses) in course.expected({e.grade_id: STATES[key] for e in course.exercises}).items():
            expected[(account.pw_name, label)] = (points, statuses)
    assert set(got) == set(expected)
    wrong = {k: (got[k], v) for k, v in expected.items() if got[k][0] != v[0] or got[k][1] not in v[1]}
    assert not wrong, wrong
    right_user = class_users["a"].pw_name
    assert sum(p for (u, _), (p, _) in got.items() if u == right_user) == course.total
    for account in class_users.values():
        assert (grades / "feedback" / f"{account.pw_name}.md").exists()


# --------------------------------------------------------------------------------------------------
# Collect's safety


@pytest.fixture
def collect_users():
    require_hub_machine()
    names = _names("c", "pqrs")
    delete_users(names)
    try:
        yield dict(zip("pqrs", create_users(names)))
    finally:
        delete_users(names)


def _as(account, path: Path) -> None:
    os.lchown(path, account.pw_uid, account.pw_gid)


def _my_work(account, files: dict[str, Path] | None = None) -> Path:
    """``account``'s ~/my-work, owned by them, holding copies of ``files`` (name -> source), owned by them too."""
    work = Path(account.pw_dir) / "my-work"
    work.mkdir()
    _as(account, work)
    for name, source in (files or {}).items():
        shutil.copy(source, work / name)
        _as(account, work / name)
    return work


def _collect(users, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "coursetools.hub", "collect", "--users",
                           ",".join(a.pw_name for a in users), "--out", str(out), *extra],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_collect_refuses_links_fifos_big_and_foreign_files(collect_users, tmp_path):
    p, q, r, s = (collect_users[k] for k in "pqrs")
    chapter = (ROOT / "chapters" / "02_queries_keys_values.ipynb")
    other = sorted((ROOT / "chapters").glob("[0-9][0-9]_*.ipynb"))
    # p: a good notebook, a symlink to /etc/shadow named as a chapter, a FIFO, an oversized notebook.
    work = _my_work(p, {chapter.name: chapter})
    (work / other[2].name).symlink_to("/etc/shadow")
    _as(p, work / other[2].name)
    os.mkfifo(work / other[3].name)
    _as(p, work / other[3].name)
    with open(work / other[4].name, "wb") as handle:
        handle.truncate(3 << 20)  # 3 MB, over the 2 MB cap below
    _as(p, work / other[4].name)
    # a notebook that belongs to root, and one with a second hard link elsewhere
    (work / other[5].name).write_text("{}")
    (work / other[6].name).write_text("{}")
    _as(p, work / other[6].name)
    os.link(work / other[6].name, Path(p.pw_dir) / "elsewhere.ipynb")
    # a file p owns but cannot read (mode 000): root could, so collect must be reading as p
    (work / other[7].name).write_text("{}")
    _as(p, work / other[7].name)
    os.chmod(work / other[7].name, 0)
    # q: my-work is a symlink to root's folder; r: nothing at all; s: a browser's copy with another case
    secret = tmp_path / "instructor-only"
    secret.mkdir(mode=0o700)
    shutil.copy(chapter, secret / chapter.name)
    (Path(q.pw_dir) / "my-work").symlink_to(secret)
    copy_name = chapter.stem.upper() + " (1).ipynb"
    _my_work(s, {copy_name: chapter})

    out = tmp_path / "submissions"
    before = {a.pw_name: sorted(os.walk(a.pw_dir)) for a in (p, q, r, s)}
    result = _collect([p, q, r, s], out, "--max-notebook-mb", "2")
    assert result.returncode == 0, result.stderr
    report = result.stdout
    # p: only the good notebook; every other file refused, saying why.
    assert sorted(x.name for x in (out / p.pw_name).iterdir()) == [chapter.name]
    assert (out / p.pw_name / chapter.name).read_bytes() == chapter.read_bytes()
    assert f"{p.pw_name}: refused {other[2].name}: a symbolic link" in report
    assert f"{p.pw_name}: refused {other[3].name}: not a regular file" in report
    assert f"{p.pw_name}: refused {other[4].name}: 3.0 MB, over the 2 MB limit" in report
    assert f"{p.pw_name}: refused {other[5].name}: owned by user id 0" in report
    assert f"{p.pw_name}: refused {other[6].name}: has 2 hard links" in report
    assert f"{p.pw_name}: refused {other[7].name}: cannot be opened safely (Permission denied)" in report
    # q's link to an instructor's folder is not followed; r has nothing; both are reported.
    assert not (out / q.pw_name).exists() and not (out / r.pw_name).exists()
    assert "nothing to hand in (2 of 4)" in report
    assert f"{q.pw_name} (~/my-work cannot be opened safely" in report
    assert f"{r.pw_name} (no ~/my-work folder)" in report
    # s: the copy is collected under the chapter's exact name, as the grader would read it.
    assert [x.name for x in (out / s.pw_name).iterdir()] == [chapter.name]
    assert (out / s.pw_name / chapter.name).read_bytes() == chapter.read_bytes()
    assert f"{s.pw_name}: collected 1: {chapter.name} (from {copy_name})" in report
    # Nothing was written into any home.
    assert {a.pw_name: sorted(os.walk(a.pw_dir)) for a in (p, q, r, s)} == before


def test_collect_never_writes_into_a_home_and_replaces_a_previous_collection(collect_users, tmp_path):
    p = collect_users["p"]
    chapter = ROOT / "chapters" / "02_queries_keys_values.ipynb"
    work = _my_work(p, {chapter.name: chapter})
    inside = _collect([p], Path(p.pw_dir) / "submissions")
    assert inside.returncode == 2 and "inside" in inside.stderr and "never writes there" in inside.stderr
    assert not (Path(p.pw_dir) / "submissions").exists()
    out = tmp_path / "submissions"
    assert _collect([p], out).returncode == 0
    assert [x.name for x in (out / p.pw_name).iterdir()] == [chapter.name]
    (work / chapter.name).unlink()  # the student deletes it: the next collection has nothing for them
    again = _collect([p], out)
    assert again.returncode == 0 and f"nothing to hand in (1 of 1): {p.pw_name}" in again.stdout
    assert not (out / p.pw_name).exists()


def test_collect_refuses_a_submissions_folder_a_student_can_change(collect_users, tmp_path):
    """A student who owns --out, or can write to it or to a folder above it, could swap other students'
    collected folders (rename in a folder they can write) or add one the grader would grade."""
    p, q = collect_users["p"], collect_users["q"]
    chapter = ROOT / "chapters" / "02_queries_keys_values.ipynb"
    _my_work(q, {chapter.name: chapter})
    # p made the folder first (say in /tmp, before the instructor's run), with a folder of their own in it
    planted = tmp_path / "made-by-a-student"
    planted.mkdir()
    os.chmod(planted, 0o777)
    (planted / "zz_fake").mkdir()
    for path in (planted, planted / "zz_fake"):
        _as(p, path)
    # p owns a folder above a root-owned --out; root's folder that anyone can write
    above = tmp_path / "students-folder"
    above.mkdir()
    _as(p, above)
    (above / "submissions").mkdir()
    open_to_all = tmp_path / "open-to-all"
    open_to_all.mkdir()
    os.chmod(open_to_all, 0o777)
    for out, why in ((planted, "belongs to user id"), (above / "submissions", "belongs to user id"),
                     (open_to_all, "can be written by other users")):
        result = _collect([p, q], out)
        assert result.returncode == 2 and why in result.stderr, (out, result.returncode, result.stderr)
        assert not (out / q.pw_name).exists()
    # The instructor who ran `sudo` may own a folder above it (their home), not a student
    r = collect_users["r"]
    mine = tmp_path / "instructors-home"
    mine.mkdir()
    _as(r, mine)
    as_sudo = subprocess.run([sys.executable, "-m", "coursetools.hub", "collect", "--users", q.pw_name,
                              "--out", str(mine / "submissions")], cwd=ROOT, capture_output=True, text=True,
                             timeout=300, env=dict(os.environ, SUDO_UID=str(r.pw_uid)))
    assert as_sudo.returncode == 0, as_sudo.stderr
    assert [x.name for x in (mine / "submissions" / q.pw_name).iterdir()] == [chapter.name]
    # Below a sticky world-writable folder (/tmp's mode) it is made, not writable by others; a folder that was
    # already there and is not collected now is named, since the grader would grade it.
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    os.chmod(sticky, 0o1777)
    out = sticky / "new" / "submissions"
    old_umask = os.umask(0o002)
    try:
        assert _collect([q], out).returncode == 0
    finally:
        os.umask(old_umask)
    assert all(stat.S_IMODE(f.stat().st_mode) == 0o755 for f in (out, out.parent))
    (out / "zz_fake").mkdir()
    again = _collect([q], out)
    assert again.returncode == 0, again.stderr
    assert "WARNING" in again.stdout and "not collected now" in again.stdout and "zz_fake" in again.stdout
    assert [x.name for x in (out / q.pw_name).iterdir()] == [chapter.name]


STOPPER = """
import os, signal, sys, time
deadline = time.monotonic() + 120
while time.monotonic() < deadline:
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) == os.getpid():  # this script's command line names coursetools.hub too
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                if b"coursetools.hub" not in handle.read():
                    continue
            os.kill(int(pid), signal.SIGSTOP)  # allowed only for a process with this user's ids: the reader
        except OSError:
            continue
        print("stopped", pid, flush=True)
        sys.exit(0)
sys.exit(1)
"""


def test_collect_goes_on_when_a_student_stops_their_reader(collect_users, tmp_path):
    """The reader of a home runs with the student's user id, so the student's own processes can SIGSTOP it:
    collect then waited for ever, for the whole class. It now stops that reader after --reader-timeout."""
    p, q = collect_users["p"], collect_users["q"]
    python = "/usr/bin/python3"
    if not os.access(python, os.X_OK):
        pytest.skip("no /usr/bin/python3 to run the student's process with")
    chapter = ROOT / "chapters" / "02_queries_keys_values.ipynb"
    _my_work(p)
    _my_work(q, {chapter.name: chapter})
    for i in range(1, 11):  # p's reader has 400 MB to send: long enough to be caught
        big = Path(p.pw_dir) / "my-work" / f"{chapter.stem} ({i}).ipynb"
        with open(big, "wb") as handle:
            handle.truncate(40 << 20)
        _as(p, big)
    student = subprocess.Popen([python, "-c", STOPPER], user=p.pw_uid, group=p.pw_gid, extra_groups=[],
                               cwd="/", stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(1)
        out = tmp_path / "submissions"
        result = _collect([p, q], out, "--reader-timeout", "5")
        said, _ = student.communicate(timeout=130)
    finally:
        if student.poll() is None:
            student.kill()
            student.wait()
    assert said.startswith("stopped"), said
    assert result.returncode == 0, result.stderr
    assert f"{q.pw_name}: collected 1: {chapter.name}" in result.stdout, result.stdout
    assert f"{p.pw_name} (the reader sent nothing for 5 s and was stopped" in result.stdout, result.stdout
    assert not (out / p.pw_name).exists()
    assert not processes_of({p.pw_uid}), "the stopped reader was left behind"


# --------------------------------------------------------------------------------------------------
# Scale-out on paper: the Zero to JupyterHub values and the single-user image's Dockerfile

Z2JH = ROOT / "coursetools" / "hub" / "zero-to-jupyterhub"
DOCKER_INSTRUCTIONS = {"FROM", "ARG", "RUN", "WORKDIR", "COPY", "ENV", "USER", "EXPOSE", "CMD"}


def _dockerfile() -> list[tuple[str, str]]:
    """(instruction, arguments), continuation lines joined, comments dropped."""
    lines, current = [], ""
    for raw in (Z2JH / "Dockerfile").read_text().splitlines():
        if not current and (not raw.strip() or raw.lstrip().startswith("#")):
            continue
        current += raw.rstrip().removesuffix("\\") + " "
        if not raw.rstrip().endswith("\\"):
            lines.append(current.strip())
            current = ""
    assert not current, "a continuation line runs off the end"
    parsed = [(line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line else "") for line in lines]
    assert {i for i, _ in parsed} <= DOCKER_INSTRUCTIONS, parsed
    return parsed


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].split(";", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==")
            pins[name.strip().lower()] = version.strip()
    return pins


def test_the_single_user_image_and_helm_values_name_the_versions_the_requirements_pin():
    import yaml

    docker = _dockerfile()
    args = dict(a.split("=", 1) for i, a in docker if i == "ARG" and "=" in a)
    learner, everything = _pins(ROOT / "requirements-learner.txt"), _pins(ROOT / "requirements.txt")
    assert args["TORCH_VERSION"] == learner["torch"] == everything["torch"]
    assert args["JUPYTERHUB_VERSION"] == everything["jupyterhub"]
    run = " ".join(a for i, a in docker if i == "RUN")
    # torch's CPU build from PyTorch's index, then the learner's whole set (every other version), then jupyterhub
    assert 'pip install --no-cache-dir "torch==${TORCH_VERSION}" --index-url https://download.pytorch.org/whl/cpu' in run
    assert "pip install --no-cache-dir -r requirements-learner.txt" in run
    assert 'pip install --no-cache-dir "jupyterhub==${JUPYTERHUB_VERSION}"' in run
    assert run.index("torch==") < run.index("-r requirements-learner.txt") < run.index("jupyterhub==")
    copied = [src.rstrip("/") for i, a in docker if i == "COPY" for src in a.split()[:-1]]
    assert "solutions" not in " ".join(copied)
    assert set(copied) >= {"utils", "coursetools", "chapters", "requirements-learner.txt"}
    assert all((ROOT / c).exists() for c in copied)
    cmd = json.loads(next(a for i, a in docker if i == "CMD"))
    env = dict(part.split("=", 1) for i, a in docker if i == "ENV" for part in a.split())
    values = yaml.safe_load((Z2JH / "values.yaml").read_text())
    single = values["singleuser"]
    assert single["image"]["tag"] == f"torch{args['TORCH_VERSION']}-jupyterhub{args['JUPYTERHUB_VERSION']}"
    assert single["cmd"] == cmd == ["python", "-m", "coursetools.hub.singleuser"]
    assert single["extraEnv"] == env
    assert env["PYTHONPATH"] == next(a for i, a in docker if i == "WORKDIR")  # where COPY put the course
    assert single["storage"]["homeMountPath"] == f"/home/{args['NB_USER']}"
    assert values["hub"]["config"]["JupyterHub"]["authenticator_class"] != "dummy"


def test_the_readme_quotes_the_recorded_grading_times():
    """The instructor's "a class of N takes about ..." table is the recorded measurement, not typed by hand."""
    from benchmarks import grading_throughput

    recorded = json.loads((ROOT / "benchmarks" / "results" / "grading_throughput.json").read_text())
    # every chapter measured is a chapter of the course (one added later is missing until measured)
    assert set(recorded["chapters"]) <= {p.name[:2] for p in (ROOT / "solutions").glob("[0-9][0-9]_*.ipynb")}
    for rows in recorded["chapters"].values():
        assert all(r["notebooks"] == r["students"] for r in rows)  # every generated notebook was graded
    assert grading_throughput.table(recorded) in (ROOT / "README.md").read_text()
