# JupyterHub configuration for a class: the course served to the machine's Unix users.
#
# Start it with `python -m coursetools.hub serve ...` (README, "For instructors"): that command stages the
# learner copy of the course, writes the settings this file reads (the JSON file named by
# COURSE_HUB_SETTINGS) and runs `jupyterhub -f <this file>`. Edit this file to change the deployment; the
# settings hold only what differs from one run to the next (addresses, the class list, folders).
#
# - Who can log in: the class list (allowed_users) with their Unix passwords, through PAM, JupyterHub's
#   default authenticator. The hub runs as root (it must, to start servers as the students' users).
#   To log students in through the university's accounts instead, replace the authenticator
#   (e.g. oauthenticator's GenericOAuthenticator), keeping the users' Unix accounts.
# - Each student's server: coursetools.hub.spawner.CourseSpawner, i.e. LocalProcessSpawner starting
#   `python -m coursetools.hub.singleuser` as the student, in bubblewrap (see that module): it creates
#   ~/my-work/ from chapters/ (never overwriting), then serves JupyterLab rooted there, with the course's
#   Python environment (the hub's own, sys.executable) as the kernel.
# - The proxy: configurable-http-proxy from npm, pinned in package.json (`npm ci`).
# - An optional service token (COURSE_HUB_SERVICE_TOKEN in the environment) for the instructor's scripts
#   and the tests: it may list users, start and stop their servers, and issue their tokens.
import json
import os
import sys

from coursetools.hub.spawner import CourseSpawner

c = get_config()  # noqa: F821 (JupyterHub provides it)

_settings_file = os.environ.get("COURSE_HUB_SETTINGS")
if not _settings_file:
    sys.exit("jupyterhub_config.py: start the hub with `python -m coursetools.hub serve` "
             "(it writes the settings this file reads)")
with open(_settings_file, encoding="utf-8") as _handle:
    settings = json.load(_handle)

# Where it listens: the public address, the hub's internal API and the proxy's API (both on loopback).
c.JupyterHub.bind_url = f"http://{settings['ip']}:{settings['port']}/"
c.JupyterHub.hub_bind_url = f"http://127.0.0.1:{settings['hub_port']}"
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{settings['proxy_api_port']}"
c.ConfigurableHTTPProxy.command = [settings["proxy_command"]]
c.ConfigurableHTTPProxy.pid_file = os.path.join(settings["private_dir"], "proxy.pid")

# The hub's own state, readable by root only.
c.JupyterHub.db_url = "sqlite:///" + os.path.join(settings["private_dir"], "jupyterhub.sqlite")
c.JupyterHub.cookie_secret_file = os.path.join(settings["private_dir"], "jupyterhub_cookie_secret")
c.JupyterHub.cleanup_servers = True  # stopping the hub stops every student's server
c.JupyterHub.cleanup_proxy = True

# Who: the class, with their Unix passwords (PAM). Admins (the instructors) may also log in.
c.JupyterHub.authenticator_class = "pam"
c.Authenticator.allowed_users = set(settings["users"])
c.Authenticator.admin_users = set(settings["admins"])

# Each student's server.
c.JupyterHub.spawner_class = CourseSpawner
c.CourseSpawner.course_dir = settings["course_dir"]
c.CourseSpawner.sandbox = settings["sandbox"]
c.Spawner.default_url = "/lab"
# A class logging in at once starts many servers (each imports JupyterLab): give them time.
c.Spawner.start_timeout = 300
c.Spawner.http_timeout = 300
c.JupyterHub.shutdown_on_logout = False

# The instructor's service token (optional).
_token = os.environ.get("COURSE_HUB_SERVICE_TOKEN")
if _token:
    c.JupyterHub.services = [{"name": "course-instructor", "api_token": _token}]
    c.JupyterHub.load_roles = [{
        "name": "course-instructor",
        "description": "list the class, start and stop their servers, issue their tokens",
        "scopes": ["list:users", "admin:users", "admin:servers", "tokens", "access:servers"],
        "services": ["course-instructor"],
    }]
