"""mhc-torch's standard streams when they cannot be written, what Python says with a traceback
outside the capture's own flow, and trace files mhc's reader refuses (hostile pass 19;
docs/torch.md): one line each, the exit status the command's, never a traceback."""
import os
import shlex
import shutil
import sqlite3
import subprocess
import sys
import textwrap

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DATA = os.path.join(REPO, "tests", "data", "advise")
ENV = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
CANNOT = "mhc-torch: standard output: cannot be written: {}; what was printed is cut short\n"


def _sh(cwd, redirections: str, *args, env=None):
    """(exit status, stdout, stderr) of `mhc-torch ARGS REDIRECTIONS` run by bash in `cwd` (the
    redirections first: `>&-` closes a stream; what bash does not redirect is captured)."""
    command = " ".join(shlex.quote(a) for a in (sys.executable, "-m", "mhc_torch.cli", *args))
    p = subprocess.run(["bash", "-c", f"{command} {redirections}"], cwd=cwd, capture_output=True, text=True,
                       env=env or ENV, timeout=300, stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout, p.stderr


def test_a_standard_output_full_or_closed_is_one_line_and_exit_2(tmp_path):
    """`runs` onto /dev/full was a traceback of OSError, exit 1; closed, the table was dropped with
    exit 0, and --help went to stderr."""
    shutil.copy(os.path.join(DATA, "speech_gru.db"), tmp_path / "t.db")   # 4 runs
    assert _sh(tmp_path, ">/dev/full", "runs", "t.db") == (2, "", CANNOT.format("No space left on device"))
    assert _sh(tmp_path, ">&-", "runs", "t.db", "--all") == (2, "", CANNOT.format("Bad file descriptor"))
    assert _sh(tmp_path, ">&-", "--help") == (2, "", CANNOT.format("Bad file descriptor"))
    # a reader gone: SIGPIPE's status, nothing said (as before). The reader leaves before the table
    # is written (`true` reads nothing, and the Python start alone takes far longer): `head -c 10`
    # raced the one buffered write, which fits the pipe, and gave exit 0 on a faster machine
    rc, out, err = _sh(tmp_path, "| true; exit ${PIPESTATUS[0]}", "runs", "t.db", "--all")
    assert (rc, err) == (141, "")


def test_a_standard_error_full_or_closed_keeps_the_exit_status(tmp_path):
    """Closed, a refusal went to the standard output (print(file=None)) and argparse's was a
    traceback of AttributeError (exit 1); full, exit 1. Now the lines are lost, nothing else."""
    for args in (["runs", "nope.db"], ["runs", "--bogus", "t.db"], ["capture", "nope", "-o", "x.db"]):
        for redirection in ("2>&-", "2>/dev/full"):
            rc, out, _ = _sh(tmp_path, redirection, *args)
            assert (rc, out) == (2, ""), (args, redirection)
    shutil.copy(os.path.join(DATA, "speech_gru.db"), tmp_path / "t.db")
    rc, out, _ = _sh(tmp_path, "2>&-", "runs", "t.db")
    assert rc == 0 and "simulated" in out


def test_a_character_the_output_encoding_lacks_is_a_question_mark(tmp_path):
    """PYTHONIOENCODING=ascii and a name with an 'é': a traceback of UnicodeEncodeError, exit 1."""
    shutil.copy(os.path.join(DATA, "tiny_mhc.db"), tmp_path / "caf\u00e9.db")   # no runs
    env = dict(ENV, PYTHONIOENCODING="ascii")
    assert _sh(tmp_path, "", "runs", "caf\u00e9.db", env=env) == (0, "caf?.db: no runs\n", "")


@pytest.mark.parametrize("sql, said", [
    ("DROP TABLE run_metrics", "missing table 'run_metrics' (a damaged or foreign file)"),
    ("DROP TABLE runs", "missing table 'runs' (a damaged or foreign file)"),
    ("UPDATE meta SET value = '2' WHERE key = 'schema_version'",
     "meta schema_version is '2', not 1 as PRAGMA user_version says (a damaged or foreign file)"),
    ("UPDATE meta SET value = 'other' WHERE key = 'format'",
     "not an mhc trace (meta format is 'other', not 'mhc-trace')"),
    # a column missing, named with its table as mhc names it ("no such column: value" named none
    # of meta, run_config and run_metrics)
    ("ALTER TABLE run_config DROP COLUMN value",
     "cannot read: table run_config has no column value (a damaged or foreign file)"),
    ("ALTER TABLE run_metrics RENAME COLUMN key TO k",
     "cannot read: table run_metrics has no column key (a damaged or foreign file)"),
    ("ALTER TABLE meta RENAME COLUMN value TO v", "cannot read: table meta has no column value (a damaged or foreign file)"),
])
def test_runs_of_a_file_mhc_refuses_is_refused_as_mhc_says_it(tmp_path, sql, said):
    """A table or a column missing was a traceback of pandas' DatabaseError or sqlite3's
    OperationalError (exit 1); meta's schema_version or format not the trace's read as a trace.
    The words are trace/src/reader.cpp's."""
    path = tmp_path / "t.db"
    shutil.copy(os.path.join(DATA, "speech_gru.db"), path)
    with sqlite3.connect(path) as db:
        db.execute(sql)
    db.close()
    assert _sh(tmp_path, "", "runs", "t.db") == (2, "", f"mhc-torch: t.db: {said}\n")


def _model(tmp_path, name: str, text: str) -> None:
    (tmp_path / name).write_text(textwrap.dedent(text))


def test_a_models_exit_handlers_cleanups_and_threads_are_one_line_each(tmp_path):
    """Python's tracebacks after mhc-torch's own line ("Exception ignored in atexit callback",
    "in: <function Lin.__del__>", "Exception in thread loader"), and the exit handler's os._exit(0)
    ended a refused capture with 0."""
    pytest.importorskip("torch")
    _model(tmp_path, "m.py", """\
        import atexit, os, threading, torch
        atexit.register(lambda: os._exit(0))
        def boom():
            raise RuntimeError("exit handler")
        atexit.register(boom)
        class Lin(torch.nn.Linear):
            def __del__(self):
                raise ValueError("cleanup")
        KEEP = []
        def died():
            raise KeyError("worker")
        def build_model():
            t = threading.Thread(target=died, name="loader")
            t.start()
            t.join()
            KEEP.append(Lin(4, 4))
            return KEEP[-1]
        def make_batch():
            raise ValueError("no batch")
    """)
    rc, out, err = _sh(tmp_path, "", "capture", "m.py", "-o", "m.db")
    assert (rc, out) == (2, "")
    assert sorted(err.splitlines()) == sorted([
        "mhc-torch: warning: the model's thread 'loader' ended: m.py:11 in died: KeyError: 'worker'",
        "mhc-torch: m.py:19 in make_batch: ValueError: no batch",
        "mhc-torch: note: m.py:4 in boom: RuntimeError: exit handler (in an atexit handler; ignored)",
        "mhc-torch: note: m.py:2 in <lambda>: the model called os._exit(0) (in an atexit handler; ignored)",
        "mhc-torch: note: m.py:8 in __del__: ValueError: cleanup (in a cleanup; ignored)"])
    assert not (tmp_path / "m.db").exists()


def test_a_model_that_prints_onto_a_full_or_gone_output_still_writes_its_trace(tmp_path):
    """The model's own print() raised: "p.py:4 in build_model: OSError" onto /dev/full,
    "BrokenPipeError" under `| head -1`, exit 2 and no trace. Now the trace is written whole."""
    pytest.importorskip("torch")
    from mhc_torch import store

    _model(tmp_path, "p.py", """\
        import torch
        def build_model():
            for i in range(100000):
                print("model line", i)
            return torch.nn.Linear(4, 4)
        def make_batch():
            return torch.randn(2, 4)
    """)
    assert _sh(tmp_path, ">/dev/full", "capture", "p.py", "-o", "c.db") == \
        (2, "", CANNOT.format("No space left on device"))
    assert store.read_meta(str(tmp_path / "c.db"))["capture.model"] == "p.py"
    rc, out, err = _sh(tmp_path, "| head -1; exit ${PIPESTATUS[0]}", "capture", "p.py", "-o", "h.db")
    assert (rc, out, err) == (141, "model line 0\n", "")
    assert store.read_meta(str(tmp_path / "h.db"))["capture.model"] == "p.py"


@pytest.mark.parametrize("setting, said", [
    ('{"offload": {"mode": "sync", "min_bytes": 99999999999999999999999}}',
     "offload.min_bytes: expected at most 72,057,594,037,927,936 bytes (2^56), got 99999999999999999999999"),
    ('{"offload": {"mode": "streamed", "max_fwd_stash": 1048577}}',
     "offload.max_fwd_stash: expected at most 1,048,576 saves (2^20), got 1048577"),
    ('{"offload": {"mode": "streamed", "prefetch": 1048577}}',
     "offload.prefetch: expected at most 1,048,576 saves (2^20), got 1048577"),
    ('{"reshard_after_forward": {"blocks.0": 1048577}}',
     "reshard_after_forward.blocks.0: expected at most 1,048,576 ranks (2^20), got 1048577"),
])
def test_a_settings_counts_past_mhcs_bounds_are_refused_before_the_capture(tmp_path, setting, said):
    """mhc-torch took counts mhc refuses (advise/src/setting.cpp: min_bytes to 2^56, the others to
    2^20): the trace was captured with a setting no mhc command reads back."""
    assert _sh(tmp_path, "", "capture", "tiny-gpt2", "-o", "s.db", "--setting", setting) == \
        (2, "", f"mhc-torch: setting: {said}\n")
    assert not (tmp_path / "s.db").exists()
