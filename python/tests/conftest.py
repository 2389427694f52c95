import os
import shutil

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


@pytest.fixture(scope="session")
def mhc_exe():
    """The C++ `mhc` binary: $MHC_EXE, else build/cli/mhc, else `mhc` on PATH. scripts/test sets
    MHC_EXE, so there a missing binary fails the tests instead of skipping them."""
    exe = os.environ.get("MHC_EXE")
    if exe:
        assert os.access(exe, os.X_OK), f"MHC_EXE={exe} is not an executable"
        return exe
    for cand in (os.path.join(REPO, "build", "cli", "mhc"), shutil.which("mhc")):
        if cand and os.access(cand, os.X_OK):
            return cand
    pytest.skip("no mhc binary (build the C++ tree or set MHC_EXE)")
