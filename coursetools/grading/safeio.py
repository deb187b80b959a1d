"""Reading files a submission could have tampered with: no links, no FIFOs or devices, bounded size.

The grader reads a submission's records after its process tree is dead, from a folder the submission
could write. Every path component below a folder the grader opened itself is opened relative to that
folder's descriptor with ``O_NOFOLLOW`` (a symbolic link anywhere fails), every file ``O_NONBLOCK`` (a
named pipe cannot block the grader), then checked with ``fstat`` to be a regular file with a single
link (no hard link to a file elsewhere) and no larger than a cap; at most ``cap + 1`` bytes are read.
"""

from __future__ import annotations

import os
import stat


class Refused(OSError):
    """A file the grader will not read, with the reason."""


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY


def open_dir(path: str | os.PathLike, dir_fd: int | None = None) -> int:
    """A descriptor of the folder ``path`` (relative to ``dir_fd`` if given), refusing a link at the end."""
    try:
        return os.open(path, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        raise Refused(f"folder {os.fspath(path)!r} cannot be opened safely ({exc.strerror})") from exc


def open_subdir(dir_fd: int, relative: str) -> int:
    """Walk ``relative`` (a/b/c) from ``dir_fd`` one component at a time, never following a link."""
    fd = os.dup(dir_fd)
    try:
        for part in relative.split("/"):
            if part in ("", ".", ".."):
                raise Refused(f"bad path component {part!r}")
            new = open_dir(part, dir_fd=fd)
            os.close(fd)
            fd = new
        return fd
    except BaseException:
        os.close(fd)
        raise


def read_bytes(dir_fd: int, name: str, cap: int, single_link: bool = True) -> bytes:
    """The content of the regular file ``name`` in ``dir_fd``, if it is at most ``cap`` bytes."""
    if "/" in name or name in ("", ".", ".."):
        raise Refused(f"bad file name {name!r}")
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise Refused(f"{name}: cannot be opened safely ({exc.strerror})") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Refused(f"{name}: not a regular file")
        if single_link and info.st_nlink != 1:
            raise Refused(f"{name}: has {info.st_nlink} hard links")
        if info.st_size > cap:
            raise Refused(f"{name}: {info.st_size} bytes, over the limit of {cap}")
        chunks, total = [], 0
        while total <= cap:
            try:
                chunk = os.read(fd, min(1 << 20, cap + 1 - total))
            except BlockingIOError as exc:
                raise Refused(f"{name}: would block") from exc
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > cap:
            raise Refused(f"{name}: grew past the limit of {cap} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_path(path: str | os.PathLike, cap: int) -> bytes:
    """Read one file the instructor pointed at (a submitted notebook): no link at the end, size-capped."""
    path = os.fspath(path)
    parent, name = os.path.split(path)
    dir_fd = os.open(parent or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        return read_bytes(dir_fd, name, cap, single_link=False)
    finally:
        os.close(dir_fd)
