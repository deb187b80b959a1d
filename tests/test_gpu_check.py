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


def test_performance_page_shows_gpu_results_when_there_are_some(tmp_path, monkeypatch):
    import json

    from benchmarks import report

    assert "## On a GPU" in report._gpu_section()[0]
    fake = {
        "run": {"date": "2026-12-01", "device": "NVIDIA H200", "torch": "2.11.0"},
        "flash": {"vendor_bf16_dense_tflops": 989.0, "measured_bf16_matmul_tflops": 790.0,
                  "correctness": [{"ok": True}, {"ok": False}],
                  "versus_sdpa": [{"n": 8192, "ratios": {"forward_time": 1.2, "forward_backward_time": 1.4,
                                                         "peak_memory": 1.0},
                                   "forward_backward_tflops": {"triton": 300.0, "sdpa": 420.0},
                                   "targets_met": {"forward_time": True, "forward_backward_time": True,
                                                   "peak_memory": True}}]},
        "attention_table": [{"n": 8192, "dtype": "torch.bfloat16", "method": "sdpa", "seconds": 0.0024,
                             "peak_bytes": 2e8, "tflops": 400.0},
                            {"n": 16384, "dtype": "torch.float32", "method": "naive", "error": "out of memory"}],
        "modules": [{"case": "EncoderBlock vs nn.TransformerEncoderLayer", "d_model": 512, "n": 1024, "batch": 16,
                     "time_ratio": 1.05, "memory_ratio": 1.1}],
        "notebooks": [{"notebook": "solutions/11_attention_on_the_gpu.ipynb", "ok": True, "seconds": 20.0}],
    }
    (tmp_path / "gpu.json").write_text(json.dumps(fake))
    monkeypatch.setattr(report, "RESULTS", tmp_path)
    text = "\n".join(report._gpu_section())
    assert "NVIDIA H200" in text and "| 8192 | 1.20 | 1.40 | 1.00 | 300 | 420 | yes |" in text
    assert "1 of 2 cases" in text and "out of memory" in text and "1 of 1 pass" in text


def test_notebook_rows_are_recorded_as_each_notebook_finishes(tmp_path, monkeypatch):
    """A run stopped partway (a borrowed GPU machine's time limit) keeps the rows it measured."""
    import json

    import nbformat

    folder = tmp_path / "solutions"
    folder.mkdir()
    for name, source in (("01_ok.ipynb", "x = 1 + 1"), ("02_fails.ipynb", "assert 1 == 2, 'expected 2'")):
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])
        nbformat.write(nb, str(folder / name))
    monkeypatch.setattr(gpu_check, "ROOT", tmp_path)
    output = tmp_path / "results" / "gpu.json"
    output.parent.mkdir()
    output.write_text(json.dumps({"notebooks": [{"notebook": "chapters/01_ok.ipynb", "ok": True, "seconds": 1.0}]}))
    seen_in_file: list[list[str]] = []

    def record(row):
        gpu_check.record_notebook_rows([row], {"device": "test"}, output)
        seen_in_file.append([r["notebook"] for r in json.loads(output.read_text())["notebooks"]])

    rows = gpu_check.run_notebooks(("solutions",), timeout=60, on_row=record)
    assert [r["ok"] for r in rows] == [True, False]
    assert "expected 2" in rows[1]["error"]
    # After the first notebook the file already holds its row, beside the earlier run's row.
    assert seen_in_file[0] == ["chapters/01_ok.ipynb", "solutions/01_ok.ipynb"]
    assert seen_in_file[1] == ["chapters/01_ok.ipynb", "solutions/01_ok.ipynb", "solutions/02_fails.ipynb"]


def test_a_recorded_sdpa_time_names_its_kernel():
    """Issue 25 (11-9): the recorded SDPA times did not say which kernel produced them. The GPU check records
    the dispatcher's choice; on the CPU the same function names a CPU kernel, and a mask rules flash out."""
    q = torch.randn(1, 2, 8, 16)
    assert gpu_check.sdpa_backend(q, q, q, is_causal=True) in {"FLASH_ATTENTION", "MATH"}
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel([SDPBackend.MATH]):
        assert gpu_check.sdpa_backend(q, q, q, is_causal=True) == "MATH"
