"""Set up the course in one command, with nothing installed yet but Python 3.11+ (standard library only).

    python3 -m coursetools.setup                 # create .venv, install, copy the chapters, open JupyterLab
    python3 -m coursetools.setup --no-lab        # the same without opening JupyterLab
    python3 -m coursetools.setup --full --no-lab # everything authors and CI need (requirements.txt)
    python3 -m coursetools.setup --no-browser --ip=127.0.0.1 --port=8888   # other options go to JupyterLab

Steps, each printed before it runs:

1. create the virtual environment `.venv/` (an existing one is reused, never deleted);
2. torch: on Linux without an NVIDIA GPU, PyTorch's CPU build from PyTorch's own wheel index (on
   Linux, PyPI's torch is the CUDA build whatever the hardware: several GB more). If that index
   cannot be reached (a proxy, an offline mirror, a firewall), it says so in one sentence and torch
   comes from the default index in the next step instead. On macOS, Windows and Linux with an
   NVIDIA GPU, torch comes from the default index (there it is the right build);
3. everything else: `requirements-learner.txt` (with `--full`, `requirements.txt`);
4. copy the chapters into `my-work/` and open JupyterLab there (`--no-lab`: only copy).

Running it again is safe: pip skips what is installed, and `my-work/` keeps your copies.
This module imports nothing outside Python's standard library, so it runs before anything is installed
(`coursetools` has no `__init__.py`, so importing it runs nothing else).
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
MIN_PYTHON = (3, 11)


def say(text: str) -> None:
    print(f"[set-up] {text}", flush=True)


def venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def torch_requirement(requirements: Path) -> str:
    """The torch line of the requirements file (one place pins the version)."""
    for line in requirements.read_text(encoding="utf-8").splitlines():
        if line.strip().startswith("torch"):
            return line.split("#")[0].strip()
    raise SystemExit(f"error: {requirements.name} pins no torch version")


def has_nvidia_gpu() -> bool:
    return Path("/proc/driver/nvidia/version").exists() or shutil.which("nvidia-smi") is not None


def torch_route(choice: str, system: str | None = None, nvidia: bool | None = None) -> str:
    """'cpu' (PyTorch's CPU index first) or 'default' (the default index only)."""
    if choice != "auto":
        return choice
    system = platform.system() if system is None else system
    nvidia = has_nvidia_gpu() if nvidia is None else nvidia
    return "cpu" if system == "Linux" and not nvidia else "default"


def show(command: list[str]) -> str:
    return " ".join(str(part) for part in command)


def run(command: list[str], quiet: bool = False) -> subprocess.CompletedProcess:
    say("running: " + show(command))
    if quiet:
        return subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    return subprocess.run(command, cwd=ROOT)


CONNECTION = re.compile(
    r"(\[Errno -?\d+\][^'\")]*|Connection refused|Name or service not known|timed out|ProxyError[^'\")]*"
    r"|SSLError[^'\")]*|CERTIFICATE_VERIFY_FAILED)"
)


def why(done: subprocess.CompletedProcess) -> str:
    """Why pip failed, in a few words: the connection error if there was one (pip's own last line,
    "ResolutionImpossible" or "conflicting dependencies", would mislead), else pip's last error."""
    text = (done.stderr or "") + "\n" + (done.stdout or "")
    found = CONNECTION.findall(text)
    if found:
        return f"pip could not connect: {found[-1].strip()}"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR")]
    return "pip said: " + (errors or lines or ["no output"])[-1][:300]


def create_venv(venv: Path) -> Path:
    python = venv_python(venv)
    if python.exists():
        say(f"using the existing environment {venv} (delete it to start from scratch)")
        if subprocess.run([str(python), "-m", "pip", "--version"], capture_output=True).returncode != 0:
            raise SystemExit(
                f"error: the environment {venv} has no working pip (left by a set-up that "
                f"failed?): `rm -rf {venv}` and run this again"
            )
        return python
    done = run([sys.executable, "-m", "venv", str(venv)])
    if done.returncode != 0 or not python.exists():
        hint = ""
        if sys.platform.startswith("linux"):
            version = f"{sys.version_info.major}.{sys.version_info.minor}"
            hint = (
                f" On Debian and Ubuntu install venv first (`sudo apt install python3-venv` or "
                f"python{version}-venv), then `rm -rf {venv}` and run this again."
            )
        raise SystemExit(f"error: could not create the virtual environment {venv}.{hint}")
    return python


def installed_version(python: Path, package: str) -> str | None:
    """The version of ``package`` in the environment of ``python``, or None when it is not installed."""
    done = subprocess.run(
        [str(python), "-c", f"import importlib.metadata as m; print(m.version({package!r}))"],
        cwd=ROOT, capture_output=True, text=True,
    )
    return done.stdout.strip() or None if done.returncode == 0 else None


def install_cpu_torch(python: Path, spec: str, index: str) -> bool:
    """Try PyTorch's CPU build from ``index``; on failure say what it costs and return False."""
    say(f"installing PyTorch's CPU build ({spec}, about 180 MiB to download) from {index}")
    done = run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--retries",
            "1",
            "--timeout",
            "30",
            spec,
            "--index-url",
            index,
        ],
        quiet=True,
    )
    if done.returncode == 0:
        return True
    say(
        f"PyTorch's CPU wheel index ({index}) could not be used, so torch will come from the default "
        "package index instead, which on Linux is usually the CUDA build: it runs on a CPU too, but it "
        "downloads about 2.6 GB more and takes about 3.8 GB more disk (NVIDIA's libraries: a learner's "
        "environment of 5.1 GB instead of 1.3 GB), unless pip finds a CPU build configured on this machine; "
        f"the line '[set-up] installed torch ...' below says which build it took. ({why(done)})"
    )
    return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m coursetools.setup",
        description="Create .venv, install the course, copy the chapters into my-work/ and open JupyterLab. "
        "Options it does not know are passed to JupyterLab.",
    )
    parser.add_argument("--no-lab", action="store_true", help="do not open JupyterLab at the end")
    parser.add_argument(
        "--full",
        action="store_true",
        help="install requirements.txt (authors, CI: tests, book, benchmarks) "
        "instead of requirements-learner.txt",
    )
    parser.add_argument(
        "--torch",
        choices=("auto", "cpu", "default"),
        default="auto",
        help="auto (default): PyTorch's CPU index on Linux without an NVIDIA GPU, else the "
        "default index; cpu: try the CPU index first; default: only the default index",
    )
    parser.add_argument("--torch-index", default=CPU_INDEX, help=f"PyTorch's CPU wheel index ({CPU_INDEX})")
    parser.add_argument(
        "--venv", type=Path, default=ROOT / ".venv", help="where to create the environment (.venv)"
    )
    args, lab_args = parser.parse_known_args(argv)
    if sys.version_info < MIN_PYTHON:
        print(
            f"error: the course needs Python {MIN_PYTHON[0]}.{MIN_PYTHON[1]} or newer; this is "
            f"{platform.python_version()} ({sys.executable})",
            file=sys.stderr,
        )
        return 2
    if lab_args and args.no_lab:
        print(f"error: --no-lab with JupyterLab options ({show(lab_args)})", file=sys.stderr)
        return 2

    started = time.monotonic()
    requirements = ROOT / ("requirements.txt" if args.full else "requirements-learner.txt")
    python = create_venv(args.venv)
    spec = torch_requirement(requirements)
    have = installed_version(python, "torch")
    if have is not None and spec == f"torch=={have.split('+')[0]}":
        say(f"torch {have} is already installed in {args.venv.name}: nothing to download for it")
    elif torch_route(args.torch) == "cpu":
        install_cpu_torch(python, spec, args.torch_index)
    else:
        say(
            "torch comes from the default package index, with the rest (on macOS, Windows and Linux with "
            "an NVIDIA GPU that is the right build)"
        )
    if run([str(python), "-m", "pip", "install", "-r", requirements.name]).returncode != 0:
        print(
            f"error: installing {requirements.name} failed (pip's message is above); fix that and run "
            "this command again: what is installed stays",
            file=sys.stderr,
        )
        return 1
    run([str(python), "-c", "import torch; print('[set-up] installed torch', torch.__version__)"])
    minutes, seconds = divmod(round(time.monotonic() - started), 60)
    say(f"installed in {minutes} min {seconds} s")
    relative = python.relative_to(ROOT) if python.is_relative_to(ROOT) else python
    if args.no_lab:
        done = run([str(python), "-m", "coursetools.workspace"])
        say(f"done. To open the course: {relative} -m coursetools.workspace lab")
        return done.returncode
    say(f"next time, `{relative} -m coursetools.workspace lab` alone reopens JupyterLab on my-work/")
    lab = [str(python), "-m", "coursetools.workspace", "lab", *lab_args]
    if os.name == "nt":  # os.execv does not replace the process on Windows
        return run(lab).returncode
    say("running: " + show(lab))
    os.chdir(ROOT)
    os.execv(lab[0], lab)  # JupyterLab in this process's place: Ctrl-C reaches JupyterLab alone
    return 0


if __name__ == "__main__":
    sys.exit(main())
