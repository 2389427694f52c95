"""The capture's per-event and per-op work, made cheaper with the same results (the traces of
test_capture_same_trace.py hold the same rows): the frame holds read a value that several of the
model's frames hold once at each return, and pass over the values whose type holds no tensor (a
frame's ints, None, modules); the batch's values are followed with the op's arguments flattened once."""
import collections
import sys

import pytest

torch = pytest.importorskip("torch")

import mhc_torch  # noqa: E402
from mhc_torch import batch_values  # noqa: E402
from mhc_torch.frame_storages import StorageKeys  # noqa: E402

K = 20       # returns of a helper while the frames below hold x
DEPTH = 6    # frames of the model's that hold x (and values that hold no tensor) while it returns


def _helper(x):
    return x


def _nest(x, depth):
    level, none, name = depth, None, "level"   # held by the frame, read at each return
    if level:
        return _nest(x, level - 1)
    for _ in range(K):
        _helper(x)
    return x * 2 if none is None and name else x


class _Nested(torch.nn.Module):
    def __init__(self, depth: int):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.depth = depth

    def forward(self, x):
        x = x + 1   # a kernel before the returns (none is read before the step's first)
        return self.lin(_nest(x, self.depth))


def _returning_code():
    """The code of the frame whose return FrameHolds._returning is reading, or None."""
    f = sys._getframe(2)
    while f is not None and f.f_code.co_name != "_returning":
        f = f.f_back
    return f.f_locals["frame"].f_code if f is not None else None


def test_a_value_many_frames_hold_is_read_once_a_return(tmp_path, monkeypatch):
    """K returns of a helper under DEPTH more frames that hold x, three ints, None and a string:
    each return read every value of every frame before (the old code: 600 more reads at K = 20,
    DEPTH = 6), x once now."""
    reads = [0]
    add = StorageKeys.add
    ours = {_helper.__code__}

    def counted(self, value, skip, out, depth=4):
        # only the reads made at the K returns of _helper: those of other code in the capture vary
        # between the two captures (the dataclass __init__ torch's fake tensors make, fewer once
        # its caches are warm, as after another test's capture in the process), and each return
        # of _nest itself reads the frames above it, DEPTH more of them in the second
        if depth == 4 and _returning_code() in ours:
            reads[0] += 1
        return add(self, value, skip, out, depth)
    monkeypatch.setattr(StorageKeys, "add", counted)
    counts = []
    for depth in (0, DEPTH):
        reads[0] = 0
        mhc_torch.capture(lambda: _Nested(depth), lambda: torch.randn(4, 8), path=str(tmp_path / f"{depth}.db"),
                          autocast_dtype=None)
        counts.append(reads[0])
    assert counts[1] - counts[0] < K, counts


Pair = collections.namedtuple("Pair", "a b")


def test_tensors_are_tree_flattens_tensors():
    """batch_values._tensors walks tuples, lists and dicts itself: the same tensors in the same
    order as tree_flatten's leaves, also under a namedtuple, an OrderedDict and a torch.Size."""
    from torch.utils._pytree import tree_flatten

    a, b, c = torch.zeros(2), torch.ones(3), torch.zeros(1, dtype=torch.long)
    cases = [((a, [b, 3, None], {"k": c}), {"out": a}),
             ((Pair(a, [b, c]), torch.Size([2, 3])), {}),
             (([[[[[a]]]]], collections.OrderedDict(x=b, y=(c, a))), {"dim": 1}),
             ((), {}), ((a,), {"alpha": 2.0, "list": [c, {"n": b}]})]
    for args, kwargs in cases:
        want = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        got = batch_values._tensors(args, kwargs)
        assert [id(t) for t in got] == [id(t) for t in want]


def test_follow_flattens_an_ops_arguments_once(monkeypatch):
    """An op over tensors without kept values (every op of a step whose batch has integer
    tensors goes through follow): its output flattened, its arguments walked once, where they were
    flattened three times before."""
    calls = [0]
    flatten = batch_values.tree_flatten

    def counted(tree, *a, **k):
        calls[0] += 1
        return flatten(tree, *a, **k)
    monkeypatch.setattr(batch_values, "tree_flatten", counted)
    x, y = torch.ones(2, 3), torch.ones(3)
    out = torch.ops.aten.add.Tensor(x, y)
    batch_values.follow(torch.ops.aten.add.Tensor, (x, y), {}, out)
    assert calls[0] == 1
    assert batch_values.shadow_of(out) is None


# Code the frame holds take as torch's (a file under torch's folder): it may swap a storage under a
# tensor a suspended frame of the model's holds, which no event of the model's tells. Each swap is
# between two ops whose returns read the frames above.
_TORCH_SIDE = {}
exec(compile("def swap_data(t, u, v):\n    v.mul_(1)\n    t.data = u\n    v.add_(1)\n\n"
             "def swap_set(t, u, v):\n    v.mul_(1)\n    t.set_(u)\n    v.add_(1)\n",
             torch.__file__.replace("__init__.py", "_swap_side.py"), "exec"), _TORCH_SIDE)


def _store(held, t):
    u = t * 2      # an op: its returns read the caller's frame
    held[0] = u    # a store into the caller's list, no event, then the return


class _Kept(torch.nn.Module):
    """The ways what a frame holds changes while the frames above it are kept: a helper's store
    into its caller's list just before it returns, a storage swapped under a held tensor by
    torch's code (`.data =`, `set_`) between two ops."""

    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(16, 16), torch.nn.Linear(16, 16)

    def forward(self, x):
        held = [None]
        h = self.a(x)
        _store(held, h)
        w, w2, v = torch.empty(16, 16), torch.empty(16, 16), torch.zeros(16, 16)
        _TORCH_SIDE["swap_data"](w, torch.ones(16, 16), v)
        _TORCH_SIDE["swap_set"](w2, torch.ones(16, 16), v)
        return self.b(torch.relu(h) + held[0] + w.sum() + w2.sum() + v.sum())


@pytest.mark.parametrize("keep", [True, False])
def test_kept_reads_are_what_reading_again_gives(tmp_path, monkeypatch, keep):
    """MHC_FRAME_HOLDS_CHECK=1 reads every kept frame again at each reuse and stops on a
    difference; the holds are those of reading every frame at every return (keep_reads off)."""
    from mhc_torch import frame_holds

    monkeypatch.setenv("MHC_FRAME_HOLDS_CHECK", "1")
    init = frame_holds.FrameHolds.__init__
    monkeypatch.setattr(frame_holds.FrameHolds, "__init__",
                        lambda self, rec, model, keep_reads=True: init(self, rec, model, keep_reads and keep))
    r = mhc_torch.capture(_Kept, lambda: torch.randn(8, 16), steps=2, path=str(tmp_path / f"{keep}.db"),
                          autocast_dtype=None)
    holds = test_kept_reads_are_what_reading_again_gives.holds
    holds[keep] = r.meta["capture.frame_holds"]
    if len(holds) == 2:
        assert holds[True] == holds[False]


test_kept_reads_are_what_reading_again_gives.holds = {}
