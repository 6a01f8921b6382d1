import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Tests neither read nor write the user's cache (a CPU calibration there would change CPU estimates); theirs, with
# the bundles' binary copies of trees (about 60 MB), is removed when the run ends.
TEST_CACHE = tempfile.mkdtemp(prefix="prenet-test-cache-")
os.environ["PRENET_CACHE"] = TEST_CACHE
atexit.register(shutil.rmtree, TEST_CACHE, ignore_errors=True)


@pytest.fixture
def run_prenet():
    """Runs the installed command line (python -m prenet) and returns the completed process."""
    def run(*args, env=None):
        return subprocess.run([sys.executable, "-m", "prenet", *args], capture_output=True, text=True,
                              env={**os.environ, **(env or {})}, timeout=600)
    return run
