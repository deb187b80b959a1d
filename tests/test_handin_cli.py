"""The hand-in check on a notebook that is not there: one clear line and exit code 2, no traceback."""

import subprocess
import sys


def test_handin_on_a_missing_file_says_so_in_one_line(tmp_path):
    missing = tmp_path / "03_scaled_dot_product_attention.ipynb"
    done = subprocess.run([sys.executable, "-m", "coursetools.handin", str(missing)], capture_output=True, text=True)
    assert done.returncode == 2
    assert "no such notebook" in done.stderr and "Traceback" not in done.stderr + done.stdout
    assert len(done.stderr.strip().splitlines()) == 1
