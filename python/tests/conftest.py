"""Shared fixtures of the Python tests: the built command line (REGATTA_CLI, set by python/CMakeLists.txt) run
with --json on the same inputs, and single-threaded torch (ctest runs test files in parallel on few cores)."""
import json
import os
import subprocess

import numpy as np
import pytest

try:  # the comparisons with torch skip without it (test_layer.py); everything else runs
    import torch
    torch.set_num_threads(1)
except ImportError:
    pass

#: Unit roundoff of binary64.
EPS = np.finfo(np.float64).eps


@pytest.fixture(scope="session")
def cli():
    path = os.environ.get("REGATTA_CLI")
    if not path or not os.path.exists(path):
        pytest.skip("REGATTA_CLI is not set to the built regatta executable (ctest sets it)")

    def run(*args, expect=0):
        done = subprocess.run([path, *map(str, args)], capture_output=True, text=True, timeout=120)
        assert done.returncode == expect, f"regatta {' '.join(map(str, args))}: exit {done.returncode}: {done.stderr}"
        return json.loads(done.stdout) if "--json" in args and expect in (0, 1) else done

    return run


def save(path, array):
    np.save(path, np.asarray(array, dtype=np.float64))
    return str(path)
