"""R through rpy2 leaves the console quiet: loading ``norm`` and fitting with it print
nothing (neither R's library-path notes nor norm's iteration counter)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


@pytest.mark.slow
def test_r_console_stays_quiet():
    pytest.importorskip("rpy2")
    # Loading norm, and with it installed, two EM fits through it (em_norm): R's
    # messages (library paths, norm's iteration counter) must not reach the console.
    code = (
        "import numpy as np\n"
        "from neumiss.baselines import em_norm, load_norm\n"
        "rng = np.random.default_rng(0)\n"
        "X = rng.normal(size=(60, 3))\n"
        "X[rng.random(X.shape) < 0.2] = np.nan\n"
        "for _ in range(2):\n"
        "    try:\n"
        "        load_norm()\n"
        "    except ImportError:\n"
        "        continue\n"
        "    em_norm(X)\n"
        "    print('em_norm ran')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    if "could not start R" in result.stderr:
        pytest.skip("R does not start here")
    assert result.returncode == 0, result.stderr
    output = result.stdout.replace("em_norm ran\n", "") + result.stderr
    assert "R[write to console]" not in output
    assert "contains no packages" not in output
    assert output.strip() == ""
