"""The capture's frame holds read what the model's frames hold at every return of the model's
Python; a frame that holds many tensors while it calls many helpers (diffusers' EMAModel.step: a
list of every parameter, two helpers a parameter) was read in full at each return, every tensor's
dense parts worked out again: 3 million tensors read in one step of a UNet. A tensor's parts are
now worked out once while it lives, and what is read stays what was."""
import pytest

torch = pytest.importorskip("torch")

import mhc_torch  # noqa: E402
from mhc_torch.frame_storages import StorageKeys, storage_of, tensors  # noqa: E402

N = 120   # tensors held, and helpers called while they are


def _touch(x):
    return x


def _hold_all(xs):
    for x in xs:
        _touch(x)


class _Holder(torch.nn.Module):
    def __init__(self, hold: bool):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.hold = hold

    def forward(self, x):
        xs = [x * i for i in range(N)]
        if self.hold:
            _hold_all(xs)
        return self.lin(x)


def _layout_reads(monkeypatch):
    """Counts reads of a fake tensor's layout (how a tensor's dense parts are told apart)."""
    from torch._subclasses.fake_tensor import FakeTensor

    reads = [0]
    layout = FakeTensor.layout

    def counted(self):
        reads[0] += 1
        return layout.fget(self)
    monkeypatch.setattr(FakeTensor, "layout", property(counted))
    return reads


def test_a_frame_held_across_many_returns_is_read_once_a_tensor(tmp_path, monkeypatch):
    """N returns of a helper while two frames hold N tensors, against the same step without the
    helper's calls: 2 N^2 more layout reads before (28,914 at N = 120), N now."""
    reads = _layout_reads(monkeypatch)
    counts = []
    for hold in (False, True):
        reads[0] = 0
        mhc_torch.capture(lambda: _Holder(hold), lambda: torch.randn(4, 8), path=str(tmp_path / f"{hold}.db"))
        counts.append(reads[0])
    assert counts[1] - counts[0] < 4 * N


def _keys(value, skip, reader=None):
    out = []
    (reader or StorageKeys()).add(value, skip, out)
    return out


def _expected(value, skip):
    return [id(storage_of(t)) for t in tensors(value, skip)]


def test_storage_keys_read_what_the_tensors_generator_reads():
    """The same storages in the same order as tensors() and storage_of(): nested containers up to
    four deep, dict values, the skipped object at any depth, a sparse COO tensor's indices and
    values, a container too long to read."""
    a, b, c = torch.zeros(3), torch.ones(2), torch.zeros(5)
    sparse = torch.eye(3).to_sparse()
    deep = [[[[a]]]]          # a at depth 4: read
    deeper = [[[[[a]]]]]      # depth 5: not read
    long = [b] * 4097         # longer than 4096: not read
    for value, skip in [((a, [b, {"k": c}]), None), ((a, [b, a]), a), (deep, None), (deeper, None),
                        (long, None), (sparse, None), ({"s": sparse, "a": a}, None), (a, a), ("text", None)]:
        assert _keys(value, skip) == _expected(value, skip)
    assert _keys(deeper, None) == [] and _keys(long, None) == []
    assert len(_keys(sparse, None)) == 2


def test_storage_keys_read_a_remembered_tensors_storage_again():
    """A tensor remembered as its own only part: `.data =` and set_() give it another storage,
    which is the one read; a tensor made after one died (maybe at its address) is worked out anew."""
    reader = StorageKeys()
    t = torch.zeros(4)
    assert _keys(t, None, reader) == [id(t.untyped_storage())]
    t.data = torch.ones(6)
    assert _keys(t, None, reader) == [id(t.untyped_storage())]
    t.set_(torch.zeros(2).untyped_storage())
    assert _keys(t, None, reader) == [id(t.untyped_storage())]
    for _ in range(50):   # new tensors, some at a dead one's address
        del t
        t = torch.eye(2).to_sparse()
        assert _keys(t, None, reader) == _expected(t, None)
        del t
        t = torch.zeros(3)
        assert _keys(t, None, reader) == [id(t.untyped_storage())]
