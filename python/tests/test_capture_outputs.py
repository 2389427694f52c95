"""mhc-torch's bad input and outputs: one line naming the user's file and line (exit 2), existing
outputs refused without --force, the model's own sys.exit, temporary files on signals and after a
kill, an unwritable output refused before the capture runs."""
import glob
import os
import signal
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
import mhc_torch  # noqa: E402
from mhc_torch import output_file, store  # noqa: E402

ENV = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(__file__), "..") + os.pathsep
           + os.environ.get("PYTHONPATH", ""))


class _Result:
    def __init__(self, returncode, stdout, stderr):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


@pytest.fixture
def _cli(capsys, monkeypatch):
    """`mhc-torch ARGS` run in this process (torch is imported once): exit status and output."""
    from mhc_torch.cli import main

    def run(*args, cwd=None):
        capsys.readouterr()
        with monkeypatch.context() as m:
            if cwd is not None:
                m.chdir(cwd)
            code = main(list(map(str, args)))
        out, err = capsys.readouterr()
        return _Result(code, out, err)
    return run


def _model(tmp_path, name, body):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


_RAISES = """
    import torch

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(8, 8)

        def forward(self, x):
            return self.lin(x[:, :7]).sum()      # line 10: a shape error

    def build_model():
        return M()

    def make_batch():
        return (torch.randn(4, 8),)
"""


def test_model_that_raises_is_one_line_naming_its_file_and_line(tmp_path, _cli):
    _model(tmp_path, "raises.py", _RAISES)
    r = _cli("capture", "raises.py", "-o", "out.db", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("mhc-torch: raises.py:10 in forward: RuntimeError: "), lines[0]
    assert not (tmp_path / "out.db").exists()


def test_model_file_failing_at_import_names_its_line(tmp_path, _cli):
    _model(tmp_path, "broken.py", """
        import torch
        SIZE = {"a": 1}["b"]                     # line 3: KeyError while loading
        def build_model(): return torch.nn.Linear(2, 2)
        def make_batch(): return (torch.randn(1, 2),)
    """)
    r = _cli("capture", "broken.py", "-o", "out.db", cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == ["mhc-torch: broken.py:3 in <module>: KeyError: 'b'"]


def test_sys_exit_in_build_model_is_an_error_not_success(tmp_path, _cli):
    _model(tmp_path, "exits.py", """
        import sys, torch
        def build_model():
            sys.exit(0)
        def make_batch():
            return (torch.randn(4, 8),)
    """)
    r = _cli("capture", "exits.py", "-o", "out.db", cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "mhc-torch: exits.py:4 in build_model: the model called sys.exit(0); no trace written"]
    assert not (tmp_path / "out.db").exists()


def test_data_dependent_op_names_the_users_line(tmp_path, _cli):
    _model(tmp_path, "nz.py", """
        import torch

        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = torch.nn.Linear(8, 8)

            def forward(self, x):
                idx = torch.nonzero(x > 0)       # line 10
                return self.lin(x).sum() + idx.numel()

        def build_model():
            return M()

        def make_batch():
            return (torch.randn(4, 8),)
    """)
    r = _cli("capture", "nz.py", "-o", "out.db", cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "mhc-torch: nz.py: op aten.nonzero.default cannot run on fake tensors (at nz.py:10 in forward): "
        "its output shape depends on tensor values; a selection by a boolean mask (x[mask], masked_select, "
        "nonzero) keeps as many elements as the mask has True values: for a loss over the masked rows keep "
        "the shapes, as in cross_entropy(logits, labels.masked_fill(~mask, -100)) (its ignore_index) or "
        "(loss * mask).sum() / mask.sum()"]


def test_existing_output_refused_without_force_and_model_never_overwritten(tmp_path, _cli):
    model = _model(tmp_path, "raises.py", _RAISES)
    source = model.read_text()
    out = tmp_path / "old.db"
    out.write_bytes(b"a trace with runs")
    r = _cli("capture", "tiny-llama", "--seq", "8", "-o", "old.db", cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "mhc-torch: old.db: already exists; pass --force to replace it (and everything in it)"]
    assert out.read_bytes() == b"a trace with runs"
    for force in ([], ["--force"]):
        r = _cli("capture", "raises.py", "-o", "raises.py", *force, cwd=tmp_path)
        assert r.returncode == 2 and "is the input file" in r.stderr and len(r.stderr.strip().splitlines()) == 1
        assert model.read_text() == source
    r = _cli("capture", "tiny-llama", "--seq", "8", "--layers", "1", "-o", "old.db", "--force", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert store.read_meta(str(out))["source"] == "captured"


def test_output_in_a_missing_folder_refused_before_the_capture_runs(tmp_path, _cli):
    built = []

    def build():
        built.append(1)
        return torch.nn.Linear(2, 2)

    with pytest.raises(store.OutputError, match="cannot write into .*missing: no such directory$"):
        mhc_torch.capture(build, lambda: (torch.randn(1, 2),), path=str(tmp_path / "missing" / "x.db"))
    assert built == []
    (tmp_path / "x.db").write_bytes(b"old")
    with pytest.raises(output_file.OutputExists):
        mhc_torch.capture(build, lambda: (torch.randn(1, 2),), path=str(tmp_path / "x.db"), replace=False)
    assert built == []
    r = _cli("capture", "tiny-llama", "-o", str(tmp_path / "missing" / "x.db"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert r.stderr.strip().endswith(f"x.db: cannot write into {tmp_path / 'missing'}: no such directory")


_SIGNAL_WRITER = """
import os, signal, sys
from mhc_torch import store

sig = int(sys.argv[2])
# As in a foreground process: a job started in the background by a shell inherits SIGINT ignored,
# and Python then raises no KeyboardInterrupt.
signal.signal(signal.SIGINT, signal.default_int_handler)

def allocations():
    for i in range(1, 200):
        if i == 100:
            os.kill(os.getpid(), sig)   # arrives while the temporary file is being written
        yield store.Allocation(id=i, bytes=64, t_alloc=i, t_free=None, category=store.OTHER)

store.write_trace(sys.argv[1], allocations(), [], [], {"source": "test"})
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_while_writing_leaves_no_temporary_file(tmp_path, sig):
    out = tmp_path / "sig.db"
    r = subprocess.run([sys.executable, "-c", _SIGNAL_WRITER, str(out), str(int(sig))], capture_output=True,
                       text=True, env=ENV)
    if sig == signal.SIGTERM:
        assert r.returncode == -signal.SIGTERM, r.stderr  # died of the signal, as it would have
    else:
        assert r.returncode != 0 and "KeyboardInterrupt" in r.stderr
    assert os.listdir(tmp_path) == []


def test_stale_temporaries_of_dead_processes_removed_by_the_next_capture(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    out = tmp_path / "t.db"
    stale = [tmp_path / f"t.db.mhc-tmp-{dead}", tmp_path / f"t.db.tmp-{dead}"]
    live = tmp_path / f"t.db.mhc-tmp-{os.getppid()}"   # a running process's: not touched
    other = tmp_path / f"u.db.mhc-tmp-{dead}"          # another output's: not touched
    for p in stale + [live, other]:
        p.write_bytes(b"half written")
    mhc_torch.capture(lambda: torch.nn.Linear(2, 2), lambda: (torch.randn(1, 2),), path=str(out),
                      autocast_dtype=None, loss_fn=lambda m, b: m(*b).sum())
    assert sorted(os.listdir(tmp_path)) == sorted(["t.db", live.name, other.name])
    assert glob.glob(str(out) + ".*tmp-*") == [str(live)]
