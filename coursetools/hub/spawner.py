"""The course's spawner: each student's server as their own Unix user, seeing only what a learner needs.

``CourseSpawner`` is JupyterHub's ``LocalProcessSpawner`` (system users, one process tree each) with
two changes when the hub runs as root and ``sandbox`` is "bwrap" (the default; Debian package
``bubblewrap``, which the grader needs too):

* The server starts inside bubblewrap, as root only long enough to build its view of the file
  system, then as the student (``setpriv``: their user and group ids, no capabilities, no new
  privileges). That view holds the system (``/usr``, ``/etc``, ...), the course environment's Python
  (read-only), the hub's learner copy of the course (``utils/``, ``coursetools/``, ``chapters/``,
  read-only), the student's own home (read-write), and private ``/tmp``. Not there: ``solutions/``
  (the answer key with the hidden tests), the repository, other students' homes, the hub's database.
  The folders above the environment are made enterable in the view, so a Python that lives in a
  folder other users may not enter (pyenv under ``/root``, a ``mktemp -d`` checkout) still starts.
* The server and every kernel it starts share one PID namespace that dies with the server
  (``--die-with-parent``: also when the hub is killed). Stopping sends SIGTERM to the server itself,
  so it shuts its kernels down, then falls back to LocalProcessSpawner's escalation.

With ``sandbox = "none"`` it is LocalProcessSpawner as JupyterHub ships it: the environment and the
course copy must then be reachable by every student (install them under ``/opt``, say), and students
can read whatever their Unix user can.

Before the server, ``coursetools.hub.singleuser`` runs as the student: it creates ``~/my-work/`` from
the course's ``chapters/`` (copying only chapters the student does not have: nothing is overwritten)
and then starts ``jupyterhub-singleuser`` with ``~/my-work`` as its root folder.
"""

from __future__ import annotations

import asyncio
import os
import pwd
import shutil
import signal
import sys
from pathlib import Path

import psutil
from jupyterhub.spawner import LocalProcessSpawner
from traitlets import Unicode

from coursetools.grading.sandbox import RootView


def python_paths() -> list[str]:
    """Folders this Python needs (the environment, its base installation, the real executable's)."""
    paths = {sys.prefix, sys.base_prefix, str(Path(os.path.realpath(sys.executable)).parent.parent)}
    return sorted(p for p in paths if os.path.isdir(p))


def bwrap_command(home: str, course: str, uid: int, gid: int, read_only: list[str] | None = None) -> list[str]:
    """bubblewrap, then setpriv to the student: the prefix of a student's server command."""
    view = RootView()
    view.args += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/dev/shm",
                  "--ro-bind-try", "/sys", "/sys"]
    for path in [*python_paths(), course, *(read_only or [])]:
        view.ro_bind(path)
    args = [shutil.which("bwrap") or "/usr/bin/bwrap", *view.args]
    args += view.parents(home) + ["--bind", home, home]
    args += ["--unshare-pid", "--unshare-ipc", "--die-with-parent", "--new-session", "--chdir", home, "--"]
    args += [shutil.which("setpriv") or "/usr/bin/setpriv", f"--reuid={uid}", f"--regid={gid}", "--init-groups",
             "--no-new-privs", "--inh-caps=-all", "--bounding-set=-all", "--"]
    return args


class CourseSpawner(LocalProcessSpawner):
    course_dir = Unicode(help="the hub's learner copy of the course (utils/, coursetools/, chapters/)").tag(config=True)
    sandbox = Unicode("bwrap", help='"bwrap": each server in bubblewrap (see the module); "none": '
                      "LocalProcessSpawner as shipped").tag(config=True)

    def _account(self) -> pwd.struct_passwd:
        return pwd.getpwnam(self.user.name)

    def get_env(self):
        env = super().get_env()
        env["PYTHONPATH"] = self.course_dir  # the kernels import utils from the learner copy
        env["COURSE_HUB_CHAPTERS"] = os.path.join(self.course_dir, "chapters")
        env.pop("VIRTUAL_ENV", None)
        return env

    def _wrapped(self) -> bool:
        return self.sandbox == "bwrap" and os.geteuid() == 0

    def make_preexec_fn(self, name):
        if not self._wrapped():
            return super().make_preexec_fn(name)
        home = self._account().pw_dir

        def preexec():  # stays root: bwrap builds the view, setpriv then drops to the student
            os.chdir(home)

        return preexec

    async def start(self):
        base = [sys.executable, "-m", "coursetools.hub.singleuser"]
        if self._wrapped():
            account = self._account()
            self.cmd = bwrap_command(account.pw_dir, self.course_dir, account.pw_uid, account.pw_gid) + base
        else:
            self.cmd = base
        return await super().start()

    def _server_process(self) -> psutil.Process | None:
        """The student's server inside the sandbox (the first process below bwrap running as the student)."""
        try:
            uid = self._account().pw_uid
            for child in psutil.Process(self.pid).children(recursive=True):
                if child.uids().real == uid:
                    return child
        except (psutil.Error, KeyError):
            pass
        return None

    async def stop(self, now=False):
        if self._wrapped() and not now and self.pid:
            server = self._server_process()
            if server is not None:
                try:
                    server.send_signal(signal.SIGTERM)  # the server stops its kernels and exits
                except psutil.Error:
                    pass
                for _ in range(int(self.term_timeout * 10)):
                    if await self.poll() is not None:
                        return
                    await asyncio.sleep(0.1)
        await super().stop(now=now)
