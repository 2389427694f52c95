"""The pytest parts' cost table: bench/ci/pytest_cputime.py's lines (a test file's import, a
module-scoped fixture, a subprocess each counted in that file) and bench/ci/pytest_costs.sh's
table and --check from them. Run with `-p pytester` (tests/python/CMakeLists.txt)."""
import os
import subprocess
import textwrap

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
COSTS = os.path.join(ROOT, "bench", "ci", "pytest_costs.sh")

# CPU time, not wall time: the same on a loaded machine.
BURN = textwrap.dedent("""
    import time

    def burn(seconds):
        end = time.process_time() + seconds
        while time.process_time() < end:
            pass
""")


def _lines(path):
    out = []
    with open(path) as f:
        for line in f:
            cpu, wall, nodeid = line.rstrip("\n").split("\t")
            out.append((float(cpu), nodeid))
    return out


def _costs(*args, check=False):
    return subprocess.run([COSTS, *args], capture_output=True, text=True, check=check)


@pytest.fixture
def measured(pytester, tmp_path):
    """A session of two test files under the plugin: its lines."""
    pytester.makepyfile(burn=BURN)
    pytester.makepyfile(
        test_imports=textwrap.dedent("""
            import pytest
            from burn import burn

            burn(0.6)   # at import, as a file that imports torch does

            @pytest.fixture(scope="module")
            def costly():
                burn(0.6)
                yield
                burn(0.3)

            def test_first(costly):
                pass

            def test_second(costly):
                pass

            @pytest.mark.parametrize("x", ["a/b", "c::d"])
            def test_ids(x):
                pass
        """),
        test_children=textwrap.dedent("""
            import subprocess, sys

            def test_child():
                subprocess.run([sys.executable, "-c", "import burn; burn.burn(0.6)"], check=True)
        """))
    out = tmp_path / "cputime.tsv"
    env = {"CPUTIME_OUT": str(out), "PYTHONPATH": os.pathsep.join([os.path.join(ROOT, "bench", "ci"), str(pytester.path)])}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        result = pytester.runpytest_subprocess("-p", "pytest_cputime", "-p", "no:cacheprovider")
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k)
            else:
                os.environ[k] = v
    result.assert_outcomes(passed=5)
    return out, _lines(out)


def test_each_cost_is_counted_in_its_file(measured):
    out, lines = measured
    by_id = {nodeid: cpu for cpu, nodeid in lines}
    # the file's import: a line of its own, under the file's node id
    assert by_id["test_imports.py"] >= 0.55, lines
    # a module-scoped fixture: its setup in the first test that uses it, its teardown in the
    # module's last test (where pytest leaves the module)
    assert by_id["test_imports.py::test_first"] >= 0.55, lines
    assert by_id["test_imports.py::test_second"] < 0.25, lines
    assert by_id["test_imports.py::test_ids[c::d]"] >= 0.25, lines
    # a subprocess the test waited for
    assert by_id["test_children.py::test_child"] >= 0.55, lines
    assert len(lines) == 7, lines   # 5 tests and 2 files' imports, each once
    # the table: each file's lines summed, rounded up
    table = _costs(str(out), check=True).stdout.splitlines()
    imports = sum(cpu for cpu, nodeid in lines if nodeid.startswith("test_imports.py"))
    rows = dict(reversed(row.split("\t")) for row in table)
    assert set(rows) == {"test_imports.py", "test_children.py"}, table
    assert int(rows["test_imports.py"]) == -int(-imports // 1) >= 2, (table, lines)


def test_the_table_from_lines_of_several_parts(tmp_path):
    """Parts' files summed per file: a file's tests in two parts, ids holding '/' and '::', the
    GPU check's entry left out, whole seconds rounded up, the costliest first."""
    a, b = tmp_path / "a.tsv", tmp_path / "b.tsv"
    a.write_text("1.25\t1.3\ttests/test_x.py\n0.30\t0.3\ttests/test_x.py::test_one[p/q]\n"
                 "5.00\t5.1\ttests/test_gpu_check.py::test_dry\n")
    b.write_text("0.50\t0.6\ttests/test_x.py::test_two[r::s]\n2.00\t2.1\ttests/test_y.py::Test::test_z\n")
    assert _costs(str(a), str(b), check=True).stdout == "3\ttest_x.py\n2\ttest_y.py\n"


def test_check_names_files_missing_or_far_off(tmp_path):
    measured = tmp_path / "m.tsv"
    measured.write_text("12.0\t12\ttests/test_new.py::t\n1.0\t1\ttests/test_shrunk.py::t\n"
                        "40.0\t40\ttests/test_grown.py::t\n10.0\t10\ttests/test_fine.py::t\n"
                        "3.0\t3\ttests/test_small.py::t\n")
    table = tmp_path / "costs.tsv"
    table.write_text("29\ttest_shrunk.py\n12\ttest_grown.py\n11\ttest_fine.py\n1\ttest_small.py\n")
    r = _costs("--check", str(table), str(measured))
    assert r.returncode == 1
    assert sorted(r.stdout.splitlines()) == sorted([
        f"{table}: test_new.py is not in it (measured 12 s; counted as the default)",
        f"{table}: test_shrunk.py counts 29 s, measured 1 s",
        f"{table}: test_grown.py counts 12 s, measured 40 s",
    ]), r.stdout
    # within twice either way, or within 5 s: nothing to say
    table.write_text("12\ttest_new.py\n1\ttest_shrunk.py\n40\ttest_grown.py\n10\ttest_fine.py\n3\ttest_small.py\n")
    r = _costs("--check", str(table), str(measured))
    assert (r.returncode, r.stdout) == (0, "")
