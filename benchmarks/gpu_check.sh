#!/usr/bin/env bash
# Run benchmarks/gpu_check.py on a GPU machine that has Python, torch (CUDA) and triton but not the
# Jupyter stack that `--notebooks` needs (nbclient, nbformat, ipykernel, ipywidgets and their
# dependencies). Those are installed from wheel files into a temporary folder, never from the network.
#
#   bash benchmarks/gpu_check.sh [--wheels DIR] [gpu_check arguments]   # e.g. --notebooks, --only flash
#   bash benchmarks/gpu_check.sh --download DIR [PYTHON_VERSION]         # on a machine that reaches PyPI
#
# --wheels DIR: where the .whl files are (default: .whl/ in the repository root, if it exists).
# --download DIR: fetch the wheels for Python PYTHON_VERSION (default 3.12, the course's GPU machine) on
#   Linux x86_64 into DIR (about 40 files, 19 MB); carry DIR to the GPU machine and pass it as --wheels.
# PYTHON: the interpreter to use (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
NEEDS="nbclient nbformat ipykernel ipywidgets"

if [[ ${1:-} == --download ]]; then
    dir=${2:?usage: bash benchmarks/gpu_check.sh --download DIR [PYTHON_VERSION]}
    version=${3:-3.12}
    "$PY" -m pip download --only-binary=:all: --python-version "$version" --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any \
        -d "$dir" $NEEDS
    echo "wheels for Python $version in $dir: carry that folder and run bash benchmarks/gpu_check.sh --wheels $dir ..."
    exit 0
fi

wheels=.whl
if [[ ${1:-} == --wheels ]]; then
    wheels=${2:?--wheels needs a folder}
    shift 2
fi

if ! "$PY" -c "import nbclient, nbformat, ipykernel, ipywidgets" 2>/dev/null; then
    if compgen -G "$wheels/*.whl" >/dev/null; then
        site=$(mktemp -d)
        "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" "$wheels"/*.whl
        export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
        echo "installed $(ls "$wheels"/*.whl | wc -l) wheels from $wheels into $site"
    else
        echo "note: $NEEDS are not installed and no wheels were found in $wheels; --notebooks will say what is missing"
    fi
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec "$PY" -m benchmarks.gpu_check "$@"
