"""Helpers for tests/test_hub.py: throw-away Unix users, a hub in its own process group, a kernel client.

Everything started here is stopped by the fixtures' finalizers, also when a test fails: the hub's
process group gets SIGTERM (JupyterHub then stops the proxy and every server), then SIGKILL; the proxy
(its own session) by its pid file; any process still running as a test user is killed; the users and
their homes are deleted.
"""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest
from course_paths import ROOT


def requirement_problems() -> list[str]:
    """Why the hub tests cannot run here (empty when they can)."""
    problems = []
    if not sys.platform.startswith("linux"):
        problems.append("the hub serves Unix users on Linux")
    elif os.geteuid() != 0:
        problems.append("creating Unix users and running the hub need root")
    for tool in ("useradd", "userdel", "chpasswd", "setpriv", "bwrap"):
        if not any(os.access(os.path.join(d, tool), os.X_OK) for d in ("/usr/sbin", "/usr/bin", "/sbin", "/bin")):
            problems.append(f"{tool} is missing")
    if not (ROOT / "node_modules" / ".bin" / "configurable-http-proxy").exists():
        problems.append("configurable-http-proxy is missing (run `npm ci`)")
    try:
        import jupyterhub  # noqa: F401
    except ImportError:
        problems.append("jupyterhub is not installed (pip install -r requirements.txt)")
    return problems


def require_hub_machine() -> None:
    """Skip where the hub cannot run; in CI (CI set) fail instead, so the test never silently skips there."""
    problems = requirement_problems()
    if problems:
        message = "; ".join(problems)
        if os.environ.get("CI"):
            pytest.fail(f"the hub test must run in CI: {message}")
        pytest.skip(message)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --------------------------------------------------------------------------------------------------
# Users


def create_users(names: list[str]) -> list[pwd.struct_passwd]:
    for name in names:
        subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", name], check=True, capture_output=True)
    return [pwd.getpwnam(n) for n in names]


def kill_user_processes(uids: set[int]) -> list[str]:
    """Kill every process running as one of ``uids``; return what was still running."""
    left = []
    for proc in psutil.process_iter(["uids", "cmdline"]):
        try:
            if proc.info["uids"] and proc.info["uids"].real in uids:
                left.append(" ".join(proc.info["cmdline"] or [])[:120])
                proc.kill()
        except psutil.Error:
            continue
    return left


def processes_of(uids: set[int]) -> list[str]:
    found = []
    for proc in psutil.process_iter(["uids", "cmdline"]):
        try:
            if proc.info["uids"] and proc.info["uids"].real in uids:
                found.append(" ".join(proc.info["cmdline"] or [])[:120])
        except psutil.Error:
            continue
    return found


def delete_users(names: list[str]) -> None:
    uids = set()
    for name in names:
        try:
            uids.add(pwd.getpwnam(name).pw_uid)
        except KeyError:
            pass
    kill_user_processes(uids)
    for name in names:
        subprocess.run(["userdel", "--remove", "--force", name], capture_output=True)


# --------------------------------------------------------------------------------------------------
# The hub


class Hub:
    def __init__(self, state: Path, users: list[str], log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.token = uuid.uuid4().hex + uuid.uuid4().hex
        self.state = state
        self.log = log
        env = dict(os.environ, COURSE_HUB_SERVICE_TOKEN=self.token, PYTHONPATH=str(ROOT))
        self.command = [sys.executable, "-m", "coursetools.hub", "serve", "--users", ",".join(users),
                        "--ip", "127.0.0.1", "--port", str(self.port), "--hub-port", str(free_port()),
                        "--proxy-api-port", str(free_port()), "--state", str(state)]
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(self.command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)

    def tail(self, size: int = 6000) -> str:
        return self.log.read_text(errors="replace")[-size:]

    def api(self, method: str, path: str, token: str | None = None, **kwargs):
        import requests

        return requests.request(method, f"{self.url}/hub/api{path}", timeout=60,
                                headers={"Authorization": f"token {token or self.token}"}, **kwargs)

    def wait_ready(self, timeout: float) -> None:
        import requests

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"the hub exited with {self.proc.returncode}:\n{self.tail()}")
            try:
                if self.api("GET", "/users").status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(1)
        raise AssertionError(f"the hub did not answer within {timeout:.0f} s:\n{self.tail()}")

    def stop(self) -> None:
        """SIGTERM to the hub's process group (JupyterHub stops servers and proxy), then SIGKILL."""
        proxy_pid = None
        pid_file = self.state / "private" / "proxy.pid"
        if pid_file.exists():
            try:
                proxy_pid = int(pid_file.read_text().strip())
            except ValueError:
                pass
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=30)
        if proxy_pid:
            try:
                proc = psutil.Process(proxy_pid)
                if "configurable-http-proxy" in " ".join(proc.cmdline()) or "node" in proc.name():
                    proc.kill()
            except psutil.Error:
                pass
        # Anything else this hub started (a server's bubblewrap names the hub's state folder) is killed too.
        for proc in psutil.process_iter(["cmdline"]):
            try:
                if proc.pid != os.getpid() and str(self.state) in " ".join(proc.info["cmdline"] or []):
                    proc.kill()
            except psutil.Error:
                continue


# --------------------------------------------------------------------------------------------------
# A kernel, through the single-user server's REST and websocket API (behind the hub's proxy)


async def run_cells(ws_url: str, token: str, sources: list[str], timeout: float) -> list[dict]:
    """Execute each source in order on one kernel; return per cell {"stdout", "error", "status"}."""
    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    connection = await websocket_connect(HTTPRequest(ws_url, headers={"Authorization": f"token {token}"}),
                                         max_message_size=64 << 20)
    session = uuid.uuid4().hex
    results = []
    try:
        for source in sources:
            msg_id = uuid.uuid4().hex
            message = {
                "header": {"msg_id": msg_id, "msg_type": "execute_request", "username": "test", "session": session,
                           "date": "", "version": "5.3"},
                "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
                "content": {"code": source, "silent": False, "store_history": True, "user_expressions": {},
                            "allow_stdin": False, "stop_on_error": False},
            }
            await connection.write_message(json.dumps(message))
            result = {"stdout": "", "error": None, "status": None}
            idle = False
            while result["status"] is None or not idle:
                raw = await asyncio.wait_for(connection.read_message(), timeout)
                if raw is None:
                    raise AssertionError("the kernel's websocket closed")
                reply = json.loads(raw)
                if reply.get("parent_header", {}).get("msg_id") != msg_id:
                    continue
                kind, content = reply["msg_type"], reply["content"]
                if kind == "stream":
                    result["stdout"] += content.get("text", "")
                elif kind == "error":
                    result["error"] = f"{content.get('ename')}: {content.get('evalue')}"
                elif kind == "execute_reply":
                    result["status"] = content.get("status")
                elif kind == "status" and content.get("execution_state") == "idle":
                    idle = True
            results.append(result)
    finally:
        connection.close()
    return results
