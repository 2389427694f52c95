"""What the capture records does not depend on how fast it records it: captures of three small
models (the standard step; mHC with checkpointing; offload, host optimizer state and bf16 weights)
hold the same rows, table by table, as the digests in data/capture-digests.json, written from
captures by the capture's code before its per-op work was made cheaper. And the machinery that made
it cheaper keeps its promises: the garbage collector's state is left as it was found, reference
cycles made by a step are still freed at its end, and ops that fake tensors run for an op are not
kernels of their own. And bench/torch/same_trace.py, which compared large captures row by row,
finds a changed row.

When a change to the capture is meant to change what it records, write the digests again:
    PYTHONPATH=python .venv/bin/python python/tests/test_capture_same_trace.py --write
"""
import gc
import hashlib
import json
import os
import sqlite3
import sys

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
import mhc_torch  # noqa: E402
from mhc_torch import store  # noqa: E402
from mhc_torch.models import preset  # noqa: E402

DIGESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "capture-digests.json")
VERSIONS = ("torch_version", "transformers_version")
# Left out of meta with the versions: the content digest (written since the digests were) is the
# other tables' rows, which are compared themselves.
DERIVED = ("content_digest",)

CASES = {
    "tiny-llama": dict(model="tiny-llama", seq=64, layers=2),
    "tiny-mhc checkpointed": dict(model="tiny-mhc", seq=32, layers=2, zero_grad="zeros",
                                  setting={"checkpoint": {"modules": ["MhcTransformer"], "policy": "mhc"}}),
    "tiny-gpt2 offloaded": dict(model="tiny-gpt2", seq=64, layers=2, setting={
        "checkpoint": {"modules": ["GPT2LMHeadModel.transformer.h.1"], "policy": "save_matmuls"},
        "offload": {"mode": "streamed", "min_bytes": 4096}, "optimizer": {"impl": "foreach", "state": "host"},
        "weights": "bf16"}),
}


def _capture(case: dict, path: str) -> None:
    c = dict(case)
    build, make_batch, loss_fn, _ = preset(c.pop("model"), batch=1, seq=c.pop("seq"), layers=c.pop("layers"))
    mhc_torch.capture(build, make_batch, steps=2, path=path, loss_fn=loss_fn, **c)


def digests(path: str) -> dict:
    """Per table: its rows in key order and a SHA-256 of them (the versions and the content digest
    left out of meta)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        out = {}
        for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name"):
            cols = ", ".join(f'"{r[1]}"' for r in db.execute(f'PRAGMA table_info("{table}")'))
            rows = db.execute(f'SELECT * FROM "{table}" ORDER BY {cols}').fetchall()
            if table == "meta":
                rows = [r for r in rows if r[0] not in VERSIONS + DERIVED]
            out[table] = [len(rows), hashlib.sha256(repr(rows).encode()).hexdigest()]
        return out
    finally:
        db.close()


def _versions() -> dict:
    import transformers

    return {"torch": torch.__version__, "transformers": transformers.__version__}


@pytest.mark.parametrize("name", list(CASES))
def test_same_rows_as_the_digests(tmp_path, name):
    with open(DIGESTS) as f:
        golden = json.load(f)
    if golden["versions"] != _versions():
        pytest.skip(f"digests written with {golden['versions']}; other versions run other ops")
    path = str(tmp_path / "t.db")
    _capture(CASES[name], path)
    got, want = digests(path), golden["cases"][name]
    assert {t: got[t] for t in got if got[t] != want.get(t)} == {}, f"tables that differ from the digests of {name}"
    assert set(got) == set(want)


def _linear(tmp_path, forward=None):
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(16, 16)

        def forward(self, x):
            return forward(self, x) if forward else self.fc(x)

    path = str(tmp_path / "t.db")
    mhc_torch.capture(Net, lambda: (torch.randn(8, 16),), steps=2, path=path, autocast_dtype=None,
                      loss_fn=lambda m, b: m(*b).sum())
    return path


def test_collector_state_as_found(tmp_path):
    """A capture neither leaves objects frozen nor thaws those someone else froze."""
    assert gc.get_freeze_count() == 0
    _linear(tmp_path)
    assert gc.get_freeze_count() == 0 and gc.isenabled()
    kept = [[object()] for _ in range(100)]
    gc.freeze()
    try:
        assert id(kept) not in {id(o) for o in gc.get_objects()}  # frozen objects are not the collector's
        _linear(tmp_path)
        assert id(kept) not in {id(o) for o in gc.get_objects()} and gc.isenabled()
    finally:
        gc.unfreeze()
    assert id(kept) in {id(o) for o in gc.get_objects()}


@pytest.mark.parametrize("frozen_before", [False, True])
def test_cycle_made_by_a_step_freed_at_its_end(tmp_path, frozen_before):
    """A forward temporary kept only by a reference cycle is freed at the end of its step (the
    collector runs there), whether or not objects were frozen before the capture."""
    def forward(self, x):
        h = self.fc(x) * 2  # 8 x 16 fp32: 512 B
        cycle = [h]
        cycle.append(cycle)
        return self.fc(h)

    if frozen_before:
        gc.freeze()
    try:
        path = _linear(tmp_path, forward)
    finally:
        if frozen_before:
            gc.unfreeze()
    db = sqlite3.connect(path)
    try:
        ends = [t for (t,) in db.execute("SELECT t_end FROM markers WHERE kind = ? ORDER BY idx", (store.MARKER_STEP,))]
        muls = db.execute("SELECT a.t_free FROM kernels k JOIN strings s ON s.id = k.name JOIN accesses x ON "
                          "x.kernel = k.id AND x.mode = ? JOIN allocations a ON a.id = x.allocation "
                          "JOIN kernel_info i ON i.kernel = k.id WHERE s.text = 'aten::mul' AND i.phase = ? "
                          "ORDER BY k.id", (store.WRITE, store.FORWARD)).fetchall()
    finally:
        db.close()
    assert [t for (t,) in muls] == ends


def test_ops_run_inside_an_op_are_not_kernels(tmp_path):
    """A custom op whose fake implementation runs ops of its own is one kernel: what the model
    ran, not what fake tensors ran to work out its result."""
    lib = "mhc_test_same_trace"

    @torch.library.custom_op(f"{lib}::scaled", mutates_args=())
    def scaled(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    @scaled.register_fake
    def _(x):
        y = torch.empty_like(x)
        return (y + 0).mul_(1)  # two kernels of its own, were they recorded

    def forward(self, x):
        with torch.no_grad():
            return self.fc(scaled(x))

    path = str(tmp_path / "t.db")
    mhc_torch.capture(lambda: _module(forward), lambda: (torch.randn(8, 16),), steps=1, path=path,
                      autocast_dtype=None, forward_only=True, loss_fn=lambda m, b: m(*b).sum())
    names = [n for (n,) in sqlite3.connect(path).execute(
        "SELECT s.text FROM kernels k JOIN strings s ON s.id = k.name ORDER BY k.id")]
    assert names.count(f"{lib}::scaled") == 1
    assert "aten::add" not in names and "aten::mul_" not in names


def _same_trace_tool():
    import importlib.util

    repo = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    spec = importlib.util.spec_from_file_location("same_trace", os.path.join(repo, "bench", "torch", "same_trace.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_same_trace_tool_finds_one_changed_row(tmp_path, capsys):
    """bench/torch/same_trace.py, which compared the traces before and after: two captures of one
    step are the same; one allocation's end moved by 1 ns is found, by table and row; a file
    that is not there is one line and exit status 2."""
    tool = _same_trace_tool()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a, b = _linear(tmp_path / "a"), _linear(tmp_path / "b")
    assert tool.main([a, b]) == 0
    db = sqlite3.connect(b)
    db.execute("UPDATE allocations SET t_free = t_free + 1 WHERE id = (SELECT max(id) FROM allocations "
               "WHERE t_free IS NOT NULL)")
    db.commit()
    db.close()
    capsys.readouterr()
    assert tool.main([a, b]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "allocations: differ in 1 of their rows" and out[1].startswith("  row ")
    assert tool.main([a, str(tmp_path / "missing.db")]) == 2
    assert capsys.readouterr().err.strip() == f"{tmp_path / 'missing.db'}: no such file"


def _module(forward):
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(16, 16)

        def forward(self, x):
            return forward(self, x)

    return Net()


def _write():
    import tempfile

    out = {"versions": _versions(), "cases": {}}
    with tempfile.TemporaryDirectory() as d:
        for name, case in CASES.items():
            path = os.path.join(d, "t.db")
            _capture(case, path)
            out["cases"][name] = digests(path)
            os.remove(path)
    os.makedirs(os.path.dirname(DIGESTS), exist_ok=True)
    with open(DIGESTS, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"wrote {DIGESTS}")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit(__doc__)
    _write()
