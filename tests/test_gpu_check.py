"""benchmarks/gpu_check.py and gpu_check.sh on a machine without a GPU: they say so and measure nothing.

The measurements themselves need CUDA (`python -m benchmarks.gpu_check` on a GPU machine; see
tests/test_gpu.py for the `gpu` marker)."""

import subprocess

import pytest
import torch
from course_paths import ROOT

from benchmarks import gpu_check


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: the checks would run")
@pytest.mark.parametrize("argv", [[], ["--notebooks"], ["--only", "flash", "--quick"]])
def test_without_cuda_it_measures_nothing_and_exits_2(argv, tmp_path, capsys):
    assert gpu_check.main([*argv, "--output", str(tmp_path / "gpu.json")]) == 2
    assert "no CUDA device" in capsys.readouterr().out
    assert not (tmp_path / "gpu.json").exists()


def test_it_says_what_the_notebooks_need():
    assert set(gpu_check.NOTEBOOK_NEEDS) >= {"nbclient", "nbformat", "ipykernel", "ipywidgets"}
    assert gpu_check.missing_notebook_packages() == []  # the course's environment has them all


def test_the_shell_companion_is_valid_bash_and_documents_its_options():
    path = ROOT / "benchmarks" / "gpu_check.sh"
    assert subprocess.run(["bash", "-n", str(path)]).returncode == 0
    text = path.read_text()
    for option in ("--wheels", "--download", "nbclient nbformat ipykernel ipywidgets"):
        assert option in text
