"""Collect the class's notebooks from each user's ``~/my-work/`` into the folder the grader reads.

    python -m coursetools.hub collect --users alice,bob,carol --out submissions/
    python -m coursetools.hub collect --users-file class.txt --out submissions/ --chapters 02 03

For each user it writes ``submissions/<user>/<NN_name>.ipynb`` (the layout of
``python -m coursetools.grading``) and prints what it took, what it refused and why, and which users
had nothing to hand in (the grader has no row for them, so this is the only place that says so).

What it copies, and how it reads, so that a student cannot make it copy something else:

* Only ``~/my-work/`` itself (no subfolders), and only files whose name is a chapter's as the grader
  normalises names: the exact ``NN_name.ipynb``; else one file that differs only in letter case or by
  a browser's copy suffix (``NN_name (1).ipynb``), which is saved under the exact name. When several
  such files and no exact name are there, each is copied under its own name and the grader gives the
  chapter 0 with a reason naming them, as it does for a folder handed in by hand.
* As root, each user's files are read by a child process that has switched to that user's ids
  (``setresuid``), so it reads no more than the user could; the instructor's process only receives
  bytes through a pipe.
* Every path component below the home folder is opened relative to its parent with ``O_NOFOLLOW``
  (a symbolic link, to ``/etc/shadow`` or anywhere, is refused), files ``O_NONBLOCK`` (a named pipe
  cannot stall it), then checked with ``fstat``: a regular file, owned by the user, with a single hard
  link, no larger than ``--max-notebook-mb`` (50, as the grader); at most that many bytes are read.
  The reader runs with the student's user id, so the student's processes may signal it (SIGSTOP): a
  reader that sends nothing for ``--reader-timeout`` seconds is killed and that student reported as
  having nothing to hand in, and the others are collected.
* It never writes into a user's home: it opens their files read-only, refuses an ``--out`` inside a
  collected user's home, and writes each user's folder in ``--out`` as a whole (a new folder renamed
  into place), so a re-run replaces the previous collection of that user.
* No student can change the submissions folder: ``--out`` and the folders above it must belong to root
  (or the collector) and not be writable by others (``check_out``), and folders in ``--out`` that were
  not collected in this run are named in a warning (the grader would grade them).
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import re
import select
import shutil
import signal
import stat
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path

from coursetools import notebooks

MAX_NOTEBOOK_BYTES = 50 << 20
COPY_SUFFIX = re.compile(r" \(\d+\)$")  # as coursetools.grading.grade: "03_x (1).ipynb"
USER_NAME = re.compile(r"^[a-z_][a-z0-9_.-]*$", re.IGNORECASE)
READER_TIMEOUT_S = 120.0  # seconds without a byte from a student's reader (a loaded machine is slow, never this slow)
MAX_COPIES = 10  # files that could be one chapter's notebook, per user
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY


class CollectError(ValueError):
    pass


@dataclass
class UserResult:
    user: str
    collected: dict[str, str] = field(default_factory=dict)  # name in submissions/ -> name in my-work/
    refused: list[str] = field(default_factory=list)  # "name: why"
    nothing: str = ""  # why there is nothing to hand in (empty when something was collected)


def chapter_names(source: Path | None = None) -> list[str]:
    return sorted(p.stem for p in (source or notebooks.CHAPTERS).glob("[0-9][0-9]_*.ipynb"))


def chapter_of(name: str, chapters: list[str]) -> str | None:
    """The chapter a file name stands for, as the grader reads names (case, " (1)"), or None."""
    stem, suffix = os.path.splitext(name)
    if suffix.lower() != ".ipynb":
        return None
    lowered = {c.lower(): c for c in chapters}
    return lowered.get(COPY_SUFFIX.sub("", stem).lower())


def _shown(name: str) -> str:
    return "".join(ch if ch.isprintable() else "?" for ch in name)[:80]


# --------------------------------------------------------------------------------------------------
# Reading one user's my-work/ (in a child process with the user's ids when run as root)


def read_my_work(home: str, uid: int, chapters: list[str], cap: int, emit) -> None:
    """Call ``emit(entry, data)`` for each chapter-named file of ``home/my-work``: entry is {"name", "chapter"}
    and data its bytes, or entry has "refused" (why) and data is None.

    Raises FileNotFoundError when there is no my-work folder, CollectError when it cannot be opened safely.
    """
    home_fd = os.open(home, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        try:
            work_fd = os.open("my-work", _DIR_FLAGS, dir_fd=home_fd)
        except FileNotFoundError:
            raise
        except OSError as exc:  # ELOOP: a link; ENOTDIR: a file; EACCES
            raise CollectError(f"~/my-work cannot be opened safely ({exc.strerror})") from exc
    finally:
        os.close(home_fd)
    try:
        per_chapter: dict[str, int] = {}
        for name in sorted(os.listdir(work_fd)):
            chapter = chapter_of(name, chapters)
            if chapter is None or name.startswith("."):
                continue  # not a chapter's notebook: not collected, not reported (scratch files, .old/)
            per_chapter[chapter] = per_chapter.get(chapter, 0) + 1
            if per_chapter[chapter] > MAX_COPIES:
                emit({"name": name, "chapter": chapter,
                      "refused": f"more than {MAX_COPIES} files could be {chapter}.ipynb"}, None)
                continue
            emit(*_read_one(work_fd, name, chapter, uid, cap))
    finally:
        os.close(work_fd)


def _read_one(work_fd: int, name: str, chapter: str, uid: int, cap: int) -> tuple[dict, bytes | None]:
    def refused(why: str) -> tuple[dict, None]:
        return {"name": name, "chapter": chapter, "refused": why}, None

    try:
        info = os.lstat(name, dir_fd=work_fd)
    except OSError as exc:
        return refused(f"cannot be read ({exc.strerror})")
    if stat.S_ISLNK(info.st_mode):
        return refused("a symbolic link (links are never followed)")
    if not stat.S_ISREG(info.st_mode):
        return refused("not a regular file")
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=work_fd)
    except OSError as exc:
        return refused(f"cannot be opened safely ({exc.strerror})")
    try:
        info = os.fstat(fd)  # of what was opened, not of what the name pointed to a moment before
        if not stat.S_ISREG(info.st_mode):
            return refused("not a regular file")
        if info.st_uid != uid:
            return refused(f"owned by user id {info.st_uid}, not by the student")
        if info.st_nlink != 1:
            return refused(f"has {info.st_nlink} hard links (a link to a file elsewhere)")
        if info.st_size > cap:
            return refused(f"{info.st_size / 2**20:.1f} MB, over the {cap / 2**20:g} MB limit (--max-notebook-mb)")
        chunks, total = [], 0
        while total <= cap:
            try:
                chunk = os.read(fd, min(1 << 20, cap + 1 - total))
            except BlockingIOError:
                return refused("would block")
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > cap:
            return refused(f"grew past the {cap / 2**20:g} MB limit while being read")
        return {"name": name, "chapter": chapter}, b"".join(chunks)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _frame(fd: int, header: dict, data: bytes | None = None) -> None:
    """One frame: the JSON header's length, the header (with the data's size), the data."""
    header = dict(header, size=len(data) if data is not None else None)
    raw = json.dumps(header).encode()
    _write_all(fd, struct.pack("!Q", len(raw)) + raw)
    if data is not None:
        _write_all(fd, data)


def _frames(fd: int, cap: int, timeout: float = READER_TIMEOUT_S):
    """Yield (header, data) frames from the reader until its final frame; CollectError when the reader sends
    nothing for ``timeout`` seconds (the student's own processes can stop it: it runs with their user id)."""
    def exactly(n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            if not select.select([fd], [], [], timeout)[0]:
                raise CollectError(f"the reader sent nothing for {timeout:g} s and was stopped (a process of "
                                   "the student's may have stopped it, or a file would not be read)")
            chunk = os.read(fd, min(1 << 20, n - len(out)))
            if not chunk:
                raise CollectError("the reader stopped early")
            out += chunk
        return bytes(out)

    while True:
        (length,) = struct.unpack("!Q", exactly(8))
        if length > 1 << 16:
            raise CollectError("the reader sent a malformed header")
        header = json.loads(exactly(length))
        size = header.pop("size")
        if size is not None and not 0 <= size <= cap:
            raise CollectError("the reader sent a file over the limit")
        yield header, (exactly(size) if size is not None else None)
        if header.get("final"):
            return


def read_as_user(account: pwd.struct_passwd, chapters: list[str], cap: int, receive,
                 timeout: float = READER_TIMEOUT_S) -> None:
    """read_my_work with ``receive(entry, data)``, in a child that switched to the user's ids first
    (when run as root), so that it reads only what the user could read."""
    if os.geteuid() != 0:
        read_my_work(account.pw_dir, account.pw_uid, chapters, cap, receive)
        return
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop to the user, read, send, exit
        code = 0
        try:
            os.close(read_end)
            os.setgroups([])
            os.setresgid(account.pw_gid, account.pw_gid, account.pw_gid)
            os.setresuid(account.pw_uid, account.pw_uid, account.pw_uid)
            error = None
            try:
                read_my_work(account.pw_dir, account.pw_uid, chapters, cap,
                             lambda entry, data: _frame(write_end, entry, data))
            except FileNotFoundError:
                error = "missing"
            except CollectError as exc:
                error = str(exc)
            except OSError as exc:
                error = f"~/my-work cannot be read ({exc.strerror})"
            _frame(write_end, {"final": True, "error": error})
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(write_end)
    error = None
    finished = False
    try:
        for header, data in _frames(read_end, cap, timeout):
            if header.get("final"):
                error = header.get("error")
            else:
                receive(header, data)
        finished = True
    finally:
        os.close(read_end)
        if not finished:  # a stopped or stalled reader would never be reaped
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _, status = os.waitpid(pid, 0)
    if error == "missing":
        raise FileNotFoundError("no ~/my-work folder")
    if error:
        raise CollectError(error)
    if os.waitstatus_to_exitcode(status) != 0:
        raise CollectError("the reader failed")


# --------------------------------------------------------------------------------------------------
# Writing the submissions folder


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.relative_to(folder)
        return True
    except ValueError:
        return False


def check_out(out: Path) -> None:
    """Refuse an ``--out`` that someone other than the collector (or root) could change.

    A student who owns the submissions folder, or can write to it or to a folder above it, could
    rename other students' folders into each other (swapping their work) or add a folder the grader
    would grade; a folder in a world-writable ``/tmp`` made by a student before the instructor's run
    is such a folder. The folder and every folder above it that exists must belong to root, to the
    collector or to the user who ran ``sudo`` (the instructor's own home is fine); none may be writable by group or others, except a folder above it with the sticky bit
    (``/tmp``: there nobody can rename what another user made).
    """
    trusted = {0, os.geteuid()}
    if os.environ.get("SUDO_UID", "").isdigit():  # the instructor who ran `sudo ... collect`
        trusted.add(int(os.environ["SUDO_UID"]))
    for folder in [out, *out.parents]:
        try:
            info = os.lstat(folder)
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
            raise CollectError(f"--out: {folder} is not a folder")
        if info.st_uid not in trusted:
            raise CollectError(f"--out: {folder} belongs to user id {info.st_uid}, who could change what is "
                               "collected there: choose a folder of your own (e.g. under /root or /srv)")
        sticky_above = folder != out and info.st_mode & stat.S_ISVTX
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not sticky_above:
            raise CollectError(f"--out: {folder} can be written by other users (mode {stat.S_IMODE(info.st_mode):o}), "
                               "who could change what is collected there: `chmod go-w` it or choose another folder")


def others_in(out: Path, users: list[str]) -> list[str]:
    """Folders in ``out`` that are not of the users just collected (the grader grades every folder there)."""
    if not out.is_dir():
        return []
    return sorted(_shown(e.name) for e in out.iterdir() if not e.name.startswith(".") and e.name not in users)


def collect(users: list[str], out: Path, chapters: list[str] | None = None,
            max_bytes: int = MAX_NOTEBOOK_BYTES, timeout: float = READER_TIMEOUT_S) -> list[UserResult]:
    chapters = chapters or chapter_names()
    accounts = []
    for user in users:
        if not USER_NAME.match(user):
            raise CollectError(f"{user!r} is not a user name")
        try:
            accounts.append(pwd.getpwnam(user))
        except KeyError:
            raise CollectError(f"no user named {user!r} on this machine") from None
    out = Path(os.path.realpath(out))
    for account in accounts:
        home = Path(os.path.realpath(account.pw_dir))
        if _inside(out, home):
            raise CollectError(f"--out {out} is inside {account.pw_name}'s home {home}: collect never writes there")
    check_out(out)
    for folder in reversed([out, *out.parents]):
        if not folder.exists():
            folder.mkdir(mode=0o755)
            os.chmod(folder, 0o755)  # whatever the umask: check_out would refuse a group-writable folder next time
    results = []
    for account in accounts:
        results.append(_collect_user(account, out, chapters, max_bytes, timeout))
    return results


def _collect_user(account: pwd.struct_passwd, out: Path, chapters: list[str], max_bytes: int,
                  timeout: float = READER_TIMEOUT_S) -> UserResult:
    result = UserResult(account.pw_name)
    new = out / f".{account.pw_name}.new-{os.getpid()}"
    shutil.rmtree(new, ignore_errors=True)
    new.mkdir(mode=0o700)
    received: dict[str, list[tuple[str, Path]]] = {}  # chapter -> (name in my-work, where its bytes are)

    def receive(entry: dict, data: bytes | None) -> None:
        name, chapter = str(entry.get("name", "")), entry.get("chapter")
        if chapter not in chapters or chapter_of(name, chapters) != chapter:
            raise CollectError("the reader sent an entry that is not a chapter's notebook")
        if data is None:
            result.refused.append(f"{_shown(name)}: {entry.get('refused', 'refused')}")
            return
        spool = new / f".part-{sum(map(len, received.values()))}"
        fd = os.open(spool, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        received.setdefault(chapter, []).append((name, spool))

    try:
        try:
            read_as_user(account, chapters, max_bytes, receive, timeout)
        except FileNotFoundError:
            result.nothing = "no ~/my-work folder"
        except CollectError as exc:
            result.nothing = str(exc)
        if result.nothing:
            received.clear()
        for chapter, found in sorted(received.items()):
            exact = next(((n, p) for n, p in found if n == f"{chapter}.ipynb"), None)
            if exact is not None:
                chosen = [(exact[0], exact[0], exact[1])]
                result.refused += [f"{_shown(n)}: not collected, {exact[0]} is this chapter's notebook"
                                   for n, _ in found if n != exact[0]]
            elif len(found) == 1:
                chosen = [(f"{chapter}.ipynb", found[0][0], found[0][1])]
            else:  # several candidates and no exact name: the grader gives 0 with a reason naming them
                chosen = [(n, n, p) for n, p in found]
            for target, source, spool in chosen:
                os.replace(spool, new / target)
                result.collected[target] = source
        for leftover in new.glob(".part-*"):
            leftover.unlink()
        if not result.collected and not result.nothing:
            result.nothing = "no chapter notebook in ~/my-work" + (" that could be collected" if result.refused else "")
        _swap_in(out, account.pw_name, new if result.collected else None)
    finally:
        shutil.rmtree(new, ignore_errors=True)
    return result


def _swap_in(out: Path, user: str, new: Path | None) -> None:
    """Make ``new`` the user's folder in ``out`` (or remove the old one: a previous collection must not
    be graded as this one)."""
    target = out / user
    old = out / f".{user}.old-{os.getpid()}"
    if target.exists() or target.is_symlink():
        os.replace(target, old)
    if new is not None:
        os.replace(new, target)
    if old.is_symlink() or old.is_file():
        old.unlink()
    elif old.is_dir():
        shutil.rmtree(old)


def report(results: list[UserResult]) -> str:
    lines = []
    for r in results:
        if r.collected:
            taken = ", ".join(k if k == v else f"{k} (from {_shown(v)})" for k, v in sorted(r.collected.items()))
            lines.append(f"{r.user}: collected {len(r.collected)}: {taken}")
        for why in r.refused:
            lines.append(f"{r.user}: refused {why}")
    empty = [r for r in results if not r.collected]
    if empty:
        lines.append(f"nothing to hand in ({len(empty)} of {len(results)}): "
                     + "; ".join(f"{r.user} ({r.nothing})" for r in empty))
    else:
        lines.append(f"every user ({len(results)}) had something to hand in")
    return "\n".join(lines)


def read_users(users: str | None, users_file: Path | None) -> list[str]:
    names = [u.strip() for u in (users or "").split(",") if u.strip()]
    if users_file is not None:
        for line in users_file.read_text(encoding="utf-8").splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                names.append(line)
    if not names:
        raise CollectError("name the class: --users alice,bob or --users-file class.txt (one user a line)")
    return list(dict.fromkeys(names))


def select_chapters(prefixes: list[str] | None, source: Path | None = None) -> list[str]:
    every = chapter_names(source)
    if not prefixes:
        return every
    chosen = []
    for prefix in prefixes:
        found = [c for c in every if c[:2] == prefix.strip()[:2] and c.startswith(prefix.strip())]
        if len(found) != 1:
            raise CollectError(f"--chapters: no chapter {prefix!r}; the chapters are " + ", ".join(every))
        chosen.append(found[0])
    return chosen


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--users", help="comma-separated user names")
    parser.add_argument("--users-file", type=Path, help="a file with one user name a line (# comments)")
    parser.add_argument("--out", type=Path, default=Path("submissions"), help="the grader's submissions folder")
    parser.add_argument("--chapters", nargs="+", metavar="NN",
                        help="collect only these chapters (e.g. --chapters 02 03); default: every chapter")
    parser.add_argument("--max-notebook-mb", type=float, default=MAX_NOTEBOOK_BYTES / 2**20,
                        help="larger files are not collected (default 50, the grader's limit)")
    parser.add_argument("--reader-timeout", type=float, default=READER_TIMEOUT_S, metavar="S",
                        help="a student's reader that sends nothing for this long is stopped and the student "
                             f"reported as having nothing (default {READER_TIMEOUT_S:g})")


def run(args: argparse.Namespace) -> int:
    try:
        users = read_users(args.users, args.users_file)
        results = collect(users, args.out, chapters=select_chapters(args.chapters),
                          max_bytes=int(args.max_notebook_mb * 2**20), timeout=args.reader_timeout)
    except CollectError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(report(results))
    others = others_in(Path(os.path.realpath(args.out)), [r.user for r in results])
    if others:
        print(f"WARNING: {args.out} also holds {len(others)} folder(s) not collected now, which the grader grades "
              "too: " + ", ".join(others))
    print(f"wrote {args.out}/<user>/<NN_name>.ipynb; grade with: .venv/bin/python -m coursetools.grading {args.out} "
          "--out grades/ --jobs 2")
    return 0
