"""build_model() and make_batch() that do CUDA work of their own (python/mhc_torch/built_for_gpu.py):
tensors kept outside the parameters and buffers, moved or made on "cuda"; torch.cuda calls that
initialise CUDA (set_device, the CUDA RNG's state); the allocator's settings read where CUDA
initialises, not where build_model() returns."""
import sqlite3

import pytest

torch = pytest.importorskip("torch")
import mhc_torch  # noqa: E402

D = 256
SCRATCH = 4096 * 1024 * 4   # 16 MiB of fp32 the model holds in a plain attribute


class Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(D, D)
        self.scale = torch.ones(D)   # a plain attribute, not a buffer: Module.cuda() leaves it where it is

    def forward(self, x):
        return self.lin(x) * self.scale


def _batch():
    return (torch.randn(8, D, device="cuda"),)


def _loss(m, b):
    return m(*b).float().sum()


def _capture(tmp_path, build, name="t"):
    return mhc_torch.capture(build, _batch, path=str(tmp_path / f"{name}.db"), loss_fn=_loss, autocast_dtype=None)


def test_plain_attribute_moved_to_cuda_by_hand(tmp_path):
    """The model's own code moves a plain attribute to the GPU (the way a model keeps a mask or a
    table it does not register): the forward used to fail with a device mismatch (cpu and cuda:0)."""
    def build():
        m = Scaled().cuda()
        m.scale = m.scale.cuda()
        return m
    r = _capture(tmp_path, build)
    assert r.meta["capture.cuda_init"] == "build_model"


def test_tensor_held_since_build_is_device_memory(tmp_path):
    """A scratch tensor made on "cuda" in build_model and held by the model occupies the GPU for the
    whole step: it is an allocation from the start, and in the peak (it was not recorded at all)."""
    def plain():
        return Scaled()

    def holding():
        m = Scaled()
        m.scratch = torch.empty(4096, 1024, device="cuda")
        return m
    base = _capture(tmp_path, plain, "plain")
    held = _capture(tmp_path, holding, "held")
    db = sqlite3.connect(held.path)
    allocs = db.execute("SELECT a.bytes, a.t_alloc FROM allocations a JOIN strings s ON s.id = a.label "
                        "WHERE s.text = 'held since build_model'").fetchall()
    db.close()
    assert allocs == [(SCRATCH, 0)]
    assert held.peak_bytes == base.peak_bytes + SCRATCH


def test_cuda_calls_and_rng_in_build(tmp_path):
    """torch.cuda.set_device, the CUDA RNG's state and torch.random.fork_rng in build_model: on a
    machine without CUDA they stopped the capture ("Found no NVIDIA driver", "CUDA driver version is
    insufficient"); they act on the capture's one fake device."""
    def build():
        torch.cuda.set_device(0)
        torch.cuda.manual_seed_all(0)
        state = torch.cuda.get_rng_state()
        with torch.random.fork_rng(devices=[torch.cuda.current_device()]):
            m = Scaled().cuda()
        torch.cuda.set_rng_state(state)
        return m
    r = _capture(tmp_path, build)
    assert r.meta["capture.cuda_init"] == "build_model"


@pytest.mark.parametrize("before", [True, False])
def test_allocator_conf_read_where_build_model_initialises_cuda(tmp_path, monkeypatch, before):
    """PyTorch reads PYTORCH_CUDA_ALLOC_CONF when CUDA initialises, here at build_model's model.cuda():
    set before it, the step runs with it; set after it (still inside build_model), PyTorch ignores it,
    and so does the capture, which said the opposite (it read the environment when build_model returned)."""
    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF", raising=False)
    monkeypatch.delenv("PYTORCH_ALLOC_CONF", raising=False)

    def build():
        import os

        if before:
            os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
        m = Scaled().cuda()
        if not before:
            os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
        return m
    meta = _capture(tmp_path, build).meta
    if before:
        assert meta["allocator.conf"] == "expandable_segments:True"
        assert "capture.allocator_conf_late" not in meta
    else:
        assert "allocator.conf" not in meta
        assert meta["capture.allocator_conf_late"] == "expandable_segments:True"
