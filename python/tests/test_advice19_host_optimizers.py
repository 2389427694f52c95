"""torch.optim's optimizers whose step reads values into Python, under a capture. ASGD reads its
step count and `mu` (`mu.item() != 1` picks its averaging branch), values its step makes by rule
from its fills and hyperparameters: the capture keeps them while the optimizer steps and runs it.
torch.optim.Adafactor reads its parameters' and update's norms (`.item()`), values of the model's
tensors the capture does not hold: it is refused in one line that says so. Until 2026-12-07 both
were refused, with a message about a closure neither step takes (ASGD's capture, device and host:
test_settings_predicted.py's host optimizer cases)."""
import pytest

torch = pytest.importorskip("torch")

import mhc_torch  # noqa: E402
from mhc_torch.errors import CaptureError  # noqa: E402
from tiny_models import Net  # noqa: E402


def _capture(tmp_path, make, setting=None):
    return mhc_torch.capture(Net, lambda: (torch.randn(32, 16),), steps=2, path=str(tmp_path / "o.db"),
                             autocast_dtype=None, loss_fn=lambda m, b: m(*b).sum(), optimizer=make, setting=setting)


def test_adafactor_refused_saying_what_it_reads(tmp_path):
    with pytest.raises(CaptureError) as err:
        _capture(tmp_path, lambda ps: torch.optim.Adafactor(ps, lr=1e-2))
    msg = str(err.value)
    assert "\n" not in msg and "Adafactor.step() reads values of its parameters" in msg, msg
    assert "closure" not in msg
