"""The class route: serve the course on JupyterHub, then collect what students leave in ~/my-work/.

    python -m coursetools.hub serve --users-file class.txt --admin teacher --ip 0.0.0.0 --port 8000
    python -m coursetools.hub collect --users-file class.txt --out submissions/
    python -m coursetools.grading submissions/ --out grades/ --jobs 2

``serve`` (as root, on Linux) stages the learner copy of the course (``utils/``, ``coursetools/``,
``chapters/``; never ``solutions/``) in ``--state``, writes the settings that
``coursetools/hub/jupyterhub_config.py`` reads, and runs JupyterHub with that file in the foreground
(Ctrl-C, or SIGTERM, stops the hub, the proxy and every student's server). ``collect`` is
coursetools.hub.collect.
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import shutil
import socket
import sys
from pathlib import Path

from coursetools import notebooks
from coursetools.hub import collect

HERE = Path(__file__).resolve().parent
CONFIG = HERE / "jupyterhub_config.py"
LEARNER_COPY = ("utils", "coursetools", "chapters")


class ServeError(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proxy_command(root: Path = notebooks.REPO_ROOT) -> str:
    local = root / "node_modules" / ".bin" / "configurable-http-proxy"
    if local.exists():
        return str(local)
    found = shutil.which("configurable-http-proxy")
    if found:
        return found
    raise ServeError("configurable-http-proxy is missing: run `npm ci` in the repository (package.json pins it)")


def stage_course(state: Path, root: Path = notebooks.REPO_ROOT) -> Path:
    """A fresh learner copy of the course in ``state/course`` (world-readable, no solutions/)."""
    target = state / "course"
    new = state / f".course-new-{os.getpid()}"
    shutil.rmtree(new, ignore_errors=True)
    for name in LEARNER_COPY:
        shutil.copytree(root / name, new / name, symlinks=False,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints"))
    for path in [new, *new.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    old = state / f".course-old-{os.getpid()}"
    if target.exists():
        os.replace(target, old)
    os.replace(new, target)
    shutil.rmtree(old, ignore_errors=True)
    return target


def prepare(args: argparse.Namespace) -> tuple[list[str], dict[str, str]]:
    """Check the machine, stage the course, write the settings; return the hub's command and environment."""
    if os.name != "posix" or not hasattr(os, "geteuid"):
        raise ServeError("the hub serves the machine's Unix users: it runs on Linux")
    if os.geteuid() != 0:
        raise ServeError("run as root (sudo): the hub starts each student's server as that student's Unix user")
    users = collect.read_users(args.users, args.users_file)
    admins = [a.strip() for a in (args.admin or "").split(",") if a.strip()]
    missing = [u for u in users + admins if not _exists(u)]
    if missing:
        raise ServeError("no Unix account for: " + ", ".join(missing) + " (create them first, e.g. `useradd -m NAME`)")
    if args.sandbox == "bwrap":
        from coursetools.grading import sandbox

        usable, why = sandbox.bubblewrap_status()
        if not usable:
            raise ServeError(f"{why}: install Debian's `bubblewrap` package, or pass --sandbox none (students' "
                             "servers then see every file their Unix user can read, and the Python environment "
                             "must be reachable by every user)")
    # What the hub needs, checked before anything is written (a failed start leaves no hub-state/ behind).
    import importlib.util

    if importlib.util.find_spec("jupyterhub") is None:
        raise ServeError("JupyterHub is not installed in this environment: the hub needs the full set-up "
                         "(`python3 -m coursetools.setup --full --no-lab`, or `.venv/bin/pip install -r requirements.txt`)")
    proxy = proxy_command()
    state = Path(os.path.abspath(args.state))
    private = state / "private"
    state.mkdir(parents=True, exist_ok=True)
    os.chmod(state, 0o755)
    private.mkdir(exist_ok=True)
    os.chmod(private, 0o700)  # the database, the cookie secret, the settings
    course = stage_course(state)
    settings = {
        "ip": args.ip, "port": args.port or free_port(), "hub_port": args.hub_port or free_port(),
        "proxy_api_port": args.proxy_api_port or free_port(), "proxy_command": proxy,
        "private_dir": str(private), "course_dir": str(course), "users": users, "admins": admins,
        "sandbox": args.sandbox,
    }
    settings_file = private / "settings.json"
    settings_file.write_text(json.dumps(settings, indent=1) + "\n")
    env = dict(os.environ)
    env["COURSE_HUB_SETTINGS"] = str(settings_file)
    env["PYTHONPATH"] = os.pathsep.join([str(notebooks.REPO_ROOT), *filter(None, [env.get("PYTHONPATH")])])
    command = [sys.executable, "-m", "jupyterhub", "-f", str(CONFIG)]
    print(f"coursetools.hub: serving {len(users)} user(s) at http://{args.ip}:{settings['port']}/ "
          f"(state in {state}; learner copy of the course in {course})", flush=True)
    return command, env


def _exists(user: str) -> bool:
    try:
        pwd.getpwnam(user)
        return True
    except KeyError:
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m coursetools.hub", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run JupyterHub for the class (as root)")
    serve.add_argument("--users", help="comma-separated user names (the class)")
    serve.add_argument("--users-file", type=Path, help="a file with one user name a line (# comments)")
    serve.add_argument("--admin", help="comma-separated instructors' user names (hub admins)")
    serve.add_argument("--ip", default="127.0.0.1", help="address to listen on (0.0.0.0: every interface)")
    serve.add_argument("--port", type=int, default=8000, help="port to listen on (0: a free one)")
    serve.add_argument("--hub-port", type=int, default=0, help="the hub's internal API port on 127.0.0.1 (0: free)")
    serve.add_argument("--proxy-api-port", type=int, default=0, help="the proxy's API port on 127.0.0.1 (0: free)")
    serve.add_argument("--state", default="hub-state", help="folder for the hub's database and course copy")
    serve.add_argument("--sandbox", choices=("bwrap", "none"), default="bwrap",
                       help="start each server in bubblewrap (default) or as plain LocalProcessSpawner")
    gather = sub.add_parser("collect", help="copy ~/my-work/NN_*.ipynb of each user into a submissions folder")
    collect.add_arguments(gather)
    args = parser.parse_args(argv)
    if args.command == "collect":
        return collect.run(args)
    try:
        command, env = prepare(args)
    except (ServeError, collect.CollectError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    os.execve(command[0], command, env)
    return 1  # not reached
