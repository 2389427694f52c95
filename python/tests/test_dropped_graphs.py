"""A graph the step drops without a backward (a GAN's `fake = G(z).detach()` before the critic's
loss) is freed by PyTorch at the drop, with every storage it saved and, under non-reentrant
checkpointing, the inputs checkpoint kept for its recompute. The capture kept it to the step's end
through two reference cycles of its own: its saved-tensor pack hook returned the tensor itself (a
tensor its own node saves as an output, relu's or tanh's, then held that node), and PyTorch's
ModTracker waited for a module's input gradient with a hook that holds the input's node, put on
that node (docs/results.md, "Dropped graphs, and the three open rows of the six setups")."""
import sqlite3

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.utils.checkpoint import checkpoint  # noqa: E402

import mhc_torch  # noqa: E402
from tiny_models import Block  # noqa: E402


class Gen(nn.Module):
    def __init__(self, d=64, checkpointed=False):
        super().__init__()
        self.inp = nn.Sequential(nn.Linear(d, d), nn.ReLU())
        self.mid = nn.Sequential(nn.Linear(d, d), nn.ReLU())
        self.out = nn.Sequential(nn.Linear(d, d), nn.Tanh())
        self.checkpointed = checkpointed

    def forward(self, z):
        h = self.inp(z)
        h = checkpoint(self.mid, h, use_reentrant=False) if self.checkpointed else self.mid(h)
        return self.out(h)


class GAN(nn.Module):
    def __init__(self, checkpointed):
        super().__init__()
        self.G = Gen(checkpointed=checkpointed)
        self.D = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))


def critic_step(model, real, run):
    fake = model.G(torch.randn_like(real)).detach()
    model.D(fake).mean().backward()


@pytest.mark.parametrize("checkpointed", [False, True])
def test_a_graph_dropped_without_a_backward_is_freed_at_the_drop(tmp_path, checkpointed):
    path = str(tmp_path / "gan.db")
    mhc_torch.capture(lambda: GAN(checkpointed), lambda: torch.randn(256, 64), steps=1, path=path,
                      step=critic_step, autocast_dtype=None)
    with sqlite3.connect(path) as db:
        d_start = db.execute(
            "SELECT min(k.t_start) FROM kernels k JOIN kernel_info i ON i.kernel = k.id "
            "JOIN modules m ON m.id = i.module JOIN strings s ON s.id = m.name WHERE s.text LIKE '%.D%'").fetchone()[0]
        made_by_g = db.execute(
            "SELECT s.text, a.t_free FROM allocations a JOIN strings s ON s.id = a.label "
            "WHERE s.text LIKE '%.G.%:aten::%' AND s.text NOT LIKE '%tanh%'").fetchall()
    # the relu outputs (saved by their nodes and by the next Linear; under checkpointing the first
    # is the checkpoint's input) and the Linear outputs: none outlives the drop
    assert len(made_by_g) == 5, made_by_g
    late = [(label, t_free) for label, t_free in made_by_g if t_free is None or t_free > d_start]
    assert not late, (d_start, late)


def test_an_offloaded_storage_an_output_save_keeps_is_not_copied_back(monkeypatch):
    """Autograd keeps an output its own node saves (relu's) as its data, not as the tensor, so the
    tensor dies while the storage lives: offloading fc2, whose input relu saves outside the hooks,
    copied that input back in the backward though it was still on the device (a second copy). The
    capture kept the tensor itself and hid it; here on real tensors, without a capture."""
    from mhc_torch import offload

    net = nn.Sequential(Block(), Block())
    net, opt = mhc_torch.apply(net, torch.optim.SGD(net.parameters(), lr=0.1),
                          {"offload": {"mode": "sync", "modules": ["Sequential.1.fc2"], "min_bytes": 4096}})
    copies = []
    to_device = offload.SavedTensorOffload._to_device
    monkeypatch.setattr(offload.SavedTensorOffload, "_to_device", lambda self, st: copies.append(st) or to_device(self, st))
    net(torch.randn(32, 16)).sum().backward()
    opt.step()
    assert copies == []
