"""The examples run (small sizes, on the CPU backend unless a GPU is there)."""

import os
import subprocess
import sys

import pytest

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples")


@pytest.mark.parametrize("script,args", [
    ("flux2_vae_decoder.py", ["--device", "cpu", "--size", "64", "--width-divisor", "16",
                              "--iters", "1", "--dtype", "f32"]),
    ("router_logits.py", ["--device", "cpu", "--tokens", "4"]),
])
def test_example_runs_on_cpu(script, args):
    result = subprocess.run([sys.executable, os.path.join(EXAMPLES, script), *args],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "max |diff|" in result.stdout
