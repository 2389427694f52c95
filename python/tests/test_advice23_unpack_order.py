"""An offload's copies back in the order the backward's nodes unpack their saves. An RMSNorm saves
its input for the pow, then rsqrt's output, and its mul saves both again, rsqrt's output first
(MulBackward0 saves `other`, then `self`): the mul's node unpacks rsqrt's output first and brings
it back first. The prediction brought the storages back in the order of their first packs (the
input first), and the tiny mHC model's streamed offload at stash 2, prefetch 1 was predicted 68 MiB
reserved against 70 MiB captured (2026-12-07). And the loss's `labels.flatten()`, a view of the
batch the program holds: mhc_torch.offload copied it back, as the view had died, where the
prediction (and the storage) kept it on the device; the hook now takes a live base for the view.
And under autocast the bf16 logits' log_softmax output, which nll_loss reads through a cast to
fp32, is held by F.cross_entropy's C++ composite until nll_loss returns: the prediction freed it
after the cast (python/mhc_torch/frame_holds.py: what a C call of the model's code made is held to
its last kernel)."""

import pytest

torch = pytest.importorskip("torch")

import mhc_torch  # noqa: E402
from predicted_as_applied import assert_predicted_as_applied  # noqa: E402

SETTINGS = {
    "streamed": {"offload": {"mode": "streamed", "modules": None, "max_fwd_stash": 2, "prefetch": 1}},
    "sync": {"offload": {"mode": "sync", "modules": None}},
}


class _Normed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(64, 256)
        self.inp = torch.nn.Linear(256, 256)
        self.weight = torch.nn.Parameter(torch.ones(256))
        self.head = torch.nn.Linear(256, 64, bias=False)

    def forward(self, ids, labels):
        x = self.inp(self.emb(ids))
        x32 = x.float()   # tiny mHC's RMSNorm
        x = (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * self.weight
        return torch.nn.functional.cross_entropy(self.head(x).flatten(0, 1), labels.flatten())


def _batch():
    return (torch.randint(0, 64, (4, 128)), torch.randint(0, 64, (4, 128)))


def _capture(path, setting=None):
    return mhc_torch.capture(_Normed, _batch, steps=1, path=str(path), setting=setting, loss_fn=lambda m, b: m(*b))


@pytest.mark.parametrize("mode", sorted(SETTINGS))
def test_copies_back_in_unpack_order(mhc_exe, tmp_path, mode):
    _capture(tmp_path / "base.db")
    setting = SETTINGS[mode]
    assert_predicted_as_applied(mhc_exe, tmp_path, setting, _capture, group_frees=True)
