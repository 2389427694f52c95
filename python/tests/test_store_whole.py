"""What mhc-torch writes keeps the C++ tools' promises (docs/trace-format.md, "Durability and
concurrency"): never over a device, a FIFO or through a link to one; a link to a regular file is
replaced and said; a legal 253-byte name is written, its temporary file named as the C++ tools
name it; a full disk is one line, not a traceback."""
import os
import subprocess
import sys

import pytest

from mhc_torch import store
from mhc_torch.output_file import OutputError, check_output, remove_stale_temps, temp_name


def _trace(path, replace=True):
    store.write_trace(str(path), [store.Allocation(id=1, bytes=64, t_alloc=0, t_free=None, category=store.OTHER)],
                      [], [], {"source": "test"}, replace=replace)


def test_special_outputs_are_never_replaced(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    null = tmp_path / "null.db"
    null.symlink_to("/dev/null")
    for out in (fifo, null, "/dev/null"):
        for replace in (False, True):
            with pytest.raises(OutputError, match="not a regular file"):
                check_output(str(out), replace)
            with pytest.raises(OutputError, match="not a regular file"):
                _trace(out, replace)
    assert fifo.is_fifo() and null.is_symlink()


def test_a_link_to_a_regular_file_is_replaced_and_said(tmp_path, capfd):
    target = tmp_path / "target.db"
    target.write_text("old")
    link = tmp_path / "link.db"
    link.symlink_to(target)
    _trace(link)
    assert "is a symbolic link to" in capfd.readouterr().err
    assert not link.is_symlink() and target.read_text() == "old"


def test_a_253_byte_name_is_written_with_its_temporary_file_beside_it(tmp_path):
    out = tmp_path / ("t" * 250 + ".db")
    tmp = temp_name(str(out), 4194304)
    assert os.path.dirname(tmp) == str(tmp_path)
    assert len(os.path.basename(tmp)) + len("-journal") <= 255
    assert temp_name(str(tmp_path / "t.db"), 42) == str(tmp_path / "t.db.mhc-tmp-42")
    _trace(out)
    assert os.listdir(tmp_path) == [out.name]


def test_temporary_names_agree_with_the_cxx_tools(tmp_path, mhc_exe):
    """A shortened temporary file of a dead process, named here, is found and removed by `mhc`."""
    dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True).stdout)
    out = tmp_path / ("g" * 250 + ".db")
    stale = temp_name(str(out), dead)
    open(stale, "w").close()
    r = subprocess.run([mhc_exe, "-q", "generate", "--steps", "1", "--layers", "1", "-o", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert not os.path.exists(stale)
    open(stale, "w").close()
    assert remove_stale_temps(str(out)) == 1


def test_a_full_disk_is_one_line_naming_the_output(tmp_path):
    """RLIMIT_FSIZE in a child: the trace's first pages pass it, as on a full disk."""
    code = f"""
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192))
from mhc_torch import store
from mhc_torch.output_file import OutputError
try:
    store.write_trace({str(tmp_path / 'x.db')!r},
                      [store.Allocation(id=i, bytes=64, t_alloc=i, t_free=None, category=store.OTHER) for i in range(1, 5000)],
                      [], [], {{"source": "test"}})
except OutputError as e:
    print(e)
    sys.exit(2)
"""
    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(__file__), ".."))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 2, r.stderr
    assert "x.db: cannot write the trace" in r.stdout and len(r.stdout.strip().splitlines()) == 1
    assert os.listdir(tmp_path) == []
