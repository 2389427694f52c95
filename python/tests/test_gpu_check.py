"""The release's GPU check (package/gpu-check) without a GPU: its dry run of the PyTorch sections
(the training loop on torch's CPU device, the captures on fake tensors, `mhc advise`, the tables
and summary.json), run from a folder laid out as the release is (bin/, libexec/, share/), and the
sections reported as not run, with the reason, where the Python has no PyTorch."""
import json
import os
import subprocess
import sys

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PYTORCH_SECTIONS = ["record", "captured_vs_real", "advise", "mhc_overhead"]


def release_tree(root, mhc_exe):
    """The release's layout (package/CMakeLists.txt), its files linked from this checkout."""
    for d in ("bin", "libexec", "share/mhc-toolkit"):
        os.makedirs(os.path.join(root, d))
    os.symlink(os.path.abspath(mhc_exe), os.path.join(root, "bin", "mhc"))
    os.symlink(os.path.join(REPO, "package", "gpu-check"), os.path.join(root, "libexec", "gpu-check"))
    os.symlink(os.path.join(REPO, "package", "gpu"), os.path.join(root, "share", "mhc-toolkit", "gpu"))
    os.symlink(os.path.join(REPO, "python"), os.path.join(root, "share", "mhc-toolkit", "python"))
    return os.path.join(root, "libexec", "gpu-check")


def gpu_check(tmp_path, mhc_exe, python, *args):
    out = tmp_path / "out"
    env = dict(os.environ, MHC_PYTHON=python, OUT=str(out), TMPDIR=str(tmp_path))
    env.pop("PYTHONPATH", None)  # the release's own mhc_torch must be the one found
    r = subprocess.run([release_tree(str(tmp_path / "release"), mhc_exe), *args], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=1500)
    with open(out / "summary.json") as f:
        summary = json.load(f)
    return r, summary, out


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory, mhc_exe):
    pytest.importorskip("transformers")
    tmp = tmp_path_factory.mktemp("gpu-check")
    return gpu_check(tmp, mhc_exe, sys.executable, "--dry-run", "--sections", " ".join(["device", *PYTORCH_SECTIONS]))


def test_dry_run_passes_every_pytorch_section(dry_run):
    r, summary, out = dry_run
    assert r.returncode == 0, r.stdout[-4000:]
    status = {s["name"]: s["status"] for s in summary["sections"]}
    assert status == {"device": "no GPU", **{s: "dry run: passed" for s in PYTORCH_SECTIONS}}, r.stdout[-4000:]
    assert summary["dry_run"] is True and summary["verdict"].startswith("gpu-check: no GPU (dry run")
    for s in summary["sections"]:
        assert s["estimate_s"] > 0 and s["limit_s"] > 0
    # What comes back from a device is at most 8 files, none in a subfolder.
    files = sorted(os.listdir(out))
    assert files == ["gpu-check.txt", "profile-step.json.gz", "summary.json", "summary.txt"]
    with open(out / "summary.txt") as f:
        lines = f.read().splitlines()
    assert [line.split()[0] for line in lines[:-1]] == ["device", *PYTORCH_SECTIONS]
    assert lines[-1] == summary["verdict"]


def figures(summary, name):
    return next(s for s in summary["sections"] if s["name"] == name)["figures"]


def test_dry_run_record_measures_the_loop_it_records(dry_run):
    rec = figures(dry_run[1], "record")
    medians = rec["median_step_ms"]
    # The loop ran under `mhc record` (unrecorded: no GPU) and alone, 3 steps each on the CPU.
    assert medians["record --torch"] > 0 and medians["baseline native allocator"] > 0


def test_dry_run_compares_the_capture_with_the_loop(dry_run):
    f = figures(dry_run[1], "captured_vs_real")
    assert f["dry_run"] is True and f["capture"]["gpu"] == "h200"
    rows = {(r["allocator"], r["what"]): r for r in f["comparison"]}
    # The allocator changes the segments, not the live bytes; the segments hold the live bytes.
    peak = rows[("default", "peak live")]["captured"]
    assert peak > 0 and rows[("expandable_segments:True", "peak live")]["captured"] == peak
    for conf in ("default", "expandable_segments:True"):
        assert rows[(conf, "reserved")]["captured"] >= peak
        # On the CPU there are no allocator figures: nothing is compared, nothing is claimed.
        assert rows[(conf, "peak live")]["measured"] is None and rows[(conf, "peak live")]["within_target"] is None
    assert len(f["measured_default"]["step_s"]) == 3 and len(f["measured_expandable"]["step_s"]) == 3
    # One more step under torch.profiler, after the loop's figures: kept, and read by mhc import.
    assert "error" not in f["measured_expandable"]["profile"], f["measured_expandable"]["profile"]
    assert f["profile"]["kept"]["file"] == "profile-step.json.gz" and f["profile"]["import_exit"] == 0


def test_dry_run_applies_the_top_advice(dry_run):
    f = figures(dry_run[1], "advise")
    advice = f["advice"]
    top = advice["rows"][0]
    # The capacity is below the captured step's reserved peak, so the advice changed something,
    # and its top answer fits it.
    assert advice["capacity_bytes"] < advice["baseline"]["reserved_bytes"]
    # (fits: it runs under the capacity, the caching allocator's free-and-retry included; its
    # reserved peak without a limit may be above it)
    assert top["setting"] != {} and top["fits"]
    assert top.get("reserved_at_capacity_bytes", top["reserved_bytes"]) <= advice["capacity_bytes"]
    applied = f["measured_applied"]
    assert applied["setting"] == top["setting"] and len(applied["step_s"]) == 3 and applied["loss"] > 0
    assert f["comparison"]["predicted_loss"] == top["loss"]
    # The capture timed by the profiled step is refused on the CPU (its profile has no kernels).
    assert f["measured_kernels"] == {"capture_exit": 2}
    # The host step's figures were measured on this machine and given to mhc advise.
    host = f["host_step"]
    assert host["per_tensor_s"] > 0 and host["bandwidth_Bps"] > 0 and host["threads"] >= 1


def test_dry_run_measures_mhc_against_the_plain_model(dry_run):
    f = figures(dry_run[1], "mhc_overhead")
    n1, n4 = f["measured_n1"], f["measured_n4"]
    # n = 4 adds the hyper-connection maps' parameters and their kernels (Sinkhorn-Knopp's
    # 20 iterations among them): more parameters measured, a longer estimated step.
    assert n4["params"] > n1["params"] and n1["model"]["hc"] == 1 and n4["model"]["hc"] == 4
    assert f["estimated_n4"]["step_time_ns"] > f["estimated_n1"]["step_time_ns"] > 0
    assert f["overhead"]["estimated"] > 0 and f["overhead"]["measured"] is not None


def test_without_pytorch_the_sections_say_why(tmp_path, mhc_exe):
    # A Python without site-packages: no torch, as on a machine that has none.
    bare = tmp_path / "python-without-torch"
    bare.write_text(f"#!/bin/sh\nexec {sys.executable} -S \"$@\"\n")
    bare.chmod(0o755)
    r, summary, _ = gpu_check(tmp_path, mhc_exe, str(bare), "--dry-run", "--sections", " ".join(PYTORCH_SECTIONS))
    assert r.returncode == 0, r.stdout[-3000:]
    for s in summary["sections"]:
        assert s["status"] == f"not run: {bare}: no PyTorch (ModuleNotFoundError: No module named 'torch')", s
    assert "not run (see their lines): " + " ".join(PYTORCH_SECTIONS) in summary["verdict"]


def test_budget_is_a_duration_read_by_mhc(tmp_path, mhc_exe):
    # --budget reads durations as every mhc option does (mhc seconds: mhc::parse_seconds); a bare
    # number is still seconds, and the budget is counted in whole seconds.
    for given, seconds in (("9min", 540), ("90.5s", 90), ("600", 600)):
        _, summary, _ = gpu_check(tmp_path / given, mhc_exe, sys.executable, "--sections", "device", "--budget", given)
        assert summary["budget_s"] == seconds, given
    script = release_tree(str(tmp_path / "release"), mhc_exe)
    env = dict(os.environ, OUT=str(tmp_path / "refused"))
    # Said in mhc's one form of a refused value (docs/cli.md): "--option: 'value': why" (its colon was missing).
    for args, said in ((["--budget", "9m"], "gpu-check: --budget: '9m': 'm' could be minutes or milliseconds"),
                       (["--budget", "0x10"], "gpu-check: --budget: '0x10'"),
                       (["--sections", "device kernls"], "gpu-check: --sections: 'kernls': not a section; use one of"),
                       (["--budget"], "gpu-check: --budget needs a value"),
                       (["--sections"], "gpu-check: --sections needs a value")):
        r = subprocess.run([script, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=30)
        assert r.returncode == 2 and r.stderr.startswith(said), (args, r.stderr)
        assert len(r.stderr.splitlines()) == 1, r.stderr
