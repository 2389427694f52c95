import os
import shutil

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

# GNU readline, which pytest imports, writes COLUMNS=80 and LINES=24 into the C environment (not
# os.environ), so every mhc a test runs took an 80-column terminal and wrapped its lines, where a
# user's pipe gets them whole. The tests that want a width set COLUMNS themselves (monkeypatch).
for _name in ("COLUMNS", "LINES"):
    if _name not in os.environ:
        os.unsetenv(_name)


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


@pytest.fixture(scope="session")
def new_user_file():
    """Loads a model file of bench/advise/new_user by name (its own folder on sys.path while it is
    imported, as a user runs it from there)."""
    import importlib.util
    import sys

    here = os.path.join(REPO, "bench", "advise", "new_user")

    def load(name):
        sys.path.insert(0, here)
        try:
            spec = importlib.util.spec_from_file_location(f"new_user_{name}", os.path.join(here, f"{name}.py"))
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
        finally:
            sys.path.remove(here)
        return mod

    return load


@pytest.fixture(scope="session")
def shared_run(tmp_path_factory):
    """A costly step that several tests take with the same inputs (a capture in a process of its
    own: about 5 s of CPU to import torch before it starts), taken once a session:
    shared_run(key, make, into) calls make(folder) the first time the key is asked, in a new
    folder, and keeps what it returns; each call copies that folder's files into `into`, so a test
    still reads and changes files of its own. The key holds every input make reads."""
    done = {}

    def run(key, make, into):
        if key not in done:
            folder = tmp_path_factory.mktemp("shared")
            done[key] = (folder, make(folder))
        folder, result = done[key]
        shutil.copytree(folder, into, dirs_exist_ok=True)
        return result

    return run


@pytest.fixture(scope="session")
def preset_capture(tmp_path_factory):
    """A preset model's step captured once a session with the same arguments: several files read
    the same capture (tiny-mhc's Sinkhorn steps cost seconds of CPU each time).
    preset_capture(into, name, steps=..., **preset_args) captures preset(name, **preset_args) with
    its loss, mhc_torch's default optimizer and no setting, the first time those arguments are
    asked, and copies the trace into the folder `into`: (that copy's path, the CaptureResult).
    The key is every argument the capture reads, so a test gets the trace it asked for; a test of
    the capture with a setting or options of its own still captures it itself."""
    import json

    done = {}

    def capture(into, name, steps=1, **preset_args):
        import mhc_torch
        from mhc_torch.models import preset

        key = json.dumps([name, steps, preset_args], sort_keys=True)
        if key not in done:
            path = str(tmp_path_factory.mktemp("preset") / "t.db")
            build, make_batch, loss_fn, _ = preset(name, **preset_args)
            done[key] = (path, mhc_torch.capture(build, make_batch, steps=steps, path=path, loss_fn=loss_fn))
        path, result = done[key]
        copy = os.path.join(str(into), f"{name}.db")
        shutil.copyfile(path, copy)
        return copy, result

    return capture


@pytest.fixture
def capture_small():
    """Captures a new-user model file's step at its small size, with the step, loss and optimizer
    the file defines (those it does not define: mhc_torch's own)."""
    import mhc_torch

    def capture(m, path, steps=1):
        return mhc_torch.capture(lambda: m.build_model(small=True), lambda: m.make_batch(small=True), steps=steps,
                                 path=str(path), step=getattr(m, "step", None), loss_fn=getattr(m, "loss_fn", None),
                                 build_optimizer=getattr(m, "build_optimizer", None))

    return capture


@pytest.fixture(autouse=True)
def _allocator_environment_kept():
    """mhc_torch.apply sets PYTORCH_CUDA_ALLOC_CONF for the process, as a user's script wants; a
    test that applies an allocator setting must not leave it to the captures of later tests, which
    record the environment's allocator settings (test_capture_h200_gpt2 read expandable segments
    after test_apply had run)."""
    names = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")
    before = {n: os.environ.get(n) for n in names}
    yield
    for n, v in before.items():
        if v is None:
            os.environ.pop(n, None)
        else:
            os.environ[n] = v
