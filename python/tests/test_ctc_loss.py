"""F.ctc_loss in a captured step (python/mhc_torch/ctc_loss.py): refused before, whatever the
lengths ("aten._ctc_loss cannot run on fake tensors: its output shape depends on tensor values");
with the lengths as Python lists, or as tensors beside padded 2-D targets, it now captures with
CUDA's outputs."""
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import mhc_torch  # noqa: E402
from mhc_torch.capturing import CaptureError  # noqa: E402

T, N, C, S = 50, 3, 29, 10  # frames, batch, classes, target length


def _capture(path, lengths=list, flat_targets=False):
    def loss(m, b):
        lp = m(b[0]).float().log_softmax(-1).transpose(0, 1)   # T x N x C
        targets = b[1].flatten() if flat_targets else b[1]
        return F.ctc_loss(lp, targets, lengths([T] * N), lengths([S] * N))
    return mhc_torch.capture(lambda: torch.nn.Linear(8, C), lambda: (torch.randn(N, T, 8), torch.randint(1, C, (N, S))),
                             path=path, loss_fn=loss)


def _ctc_sizes(path):
    a = mhc_torch.read_table(path, "allocations")
    return sorted(a[a.label == "aten::_ctc_loss"].bytes)


def test_ctc_loss_with_list_lengths_captures_cudas_buffers(tmp_path):
    path = str(tmp_path / "ctc.db")
    _capture(path)
    a = mhc_torch.read_table(path, "allocations")
    # the loss per sample (3 x 4 B) and log_alpha: 3 x 50 x (2 x 10 + 1) fp32 = 12,600 B
    assert _ctc_sizes(path) == [12, 12600]
    alpha = a[(a.label == "aten::_ctc_loss") & (a.bytes == 12600)].iloc[0]
    bwd = a[a.label == "aten::_ctc_loss_backward"].iloc[0]
    assert bwd.bytes == T * N * C * 4              # the gradient, like log_probs
    assert alpha.t_free >= bwd.t_alloc             # log_alpha kept for the backward
    beta = a[a.label == "CTC loss backward: log_beta"]
    assert list(beta.bytes) == [12600]


def test_tensor_lengths_with_padded_targets_size_log_alpha_by_the_padded_width(tmp_path):
    """Lengths as tensors: the padded targets' width (here every target's length) bounds the
    longest target, so the buffers are those of the lengths given as lists."""
    path = str(tmp_path / "ctc.db")
    _capture(path, lengths=lambda xs: torch.tensor(xs))
    assert _ctc_sizes(path) == [12, 12600]


def test_tensor_lengths_with_concatenated_targets_still_say_why(tmp_path):
    """Concatenated 1-D targets with tensor lengths give no bound on the longest target."""
    with pytest.raises(CaptureError, match="_ctc_loss") as err:
        _capture(str(tmp_path / "ctc.db"), lengths=lambda xs: torch.tensor(xs), flat_targets=True)
    # the message says what to write instead, not only that tensor values are to blame
    assert "as Python lists" in str(err.value) and "lengths.tolist()" in str(err.value)


def test_real_tensors_keep_torchs_ctc_loss():
    from mhc_torch.ctc_loss import ctc_on_fake

    torch.manual_seed(0)
    lp = torch.randn(T, N, C).log_softmax(-1)
    tg = torch.randint(1, C, (N, S))
    want = F.ctc_loss(lp, tg, [T] * N, [S] * N)
    with ctc_on_fake():
        got = F.ctc_loss(lp, tg, [T] * N, [S] * N)
    assert torch.equal(want, got)
