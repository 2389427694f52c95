"""The optimizer on the host steps its copies one parameter at a time whatever the user's foreach:
foreach=True on CPU tensors makes each temporary for all parameters at once (`_foreach_sqrt` of
every second moment: one fp32 copy of the parameters on the host, 25.1 GiB on Llama-2-7B), the
for-loop one parameter's. Until 2026-12-07 the user's foreach=True was kept on the host copies
and capturable=True stopped the first host step (torch refuses it for CPU tensors). The weights
are those of the user's optimizer on a CPU: bitwise for torch.optim's classes but NAdam and
RAdam, whose for-loop orders a product otherwise (equal to float32's rounding)."""
import copy

import pytest

torch = pytest.importorskip("torch")

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

import mhc_torch  # noqa: E402

HOST = {"optimizer": {"state": "host"}}
OPTIMIZERS = {   # the user's optimizer, foreach=True as on a GPU
    "adam": lambda ps: torch.optim.Adam(ps, lr=1e-2, weight_decay=0.01, foreach=True),
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1, foreach=True),
    "sgd-momentum": lambda ps: torch.optim.SGD(ps, lr=1e-2, momentum=0.9, weight_decay=1e-4, foreach=True),
    "adagrad": lambda ps: torch.optim.Adagrad(ps, lr=1e-2, weight_decay=0.01, foreach=True),
    "nadam": lambda ps: torch.optim.NAdam(ps, lr=1e-2, foreach=True),
    "adam-capturable": lambda ps: torch.optim.Adam(ps, lr=1e-2, capturable=True, foreach=True),
}
BITWISE = {"adam", "adamw", "sgd-momentum", "adagrad"}


class _OpNames(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.names = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.add(func.__name__)
        return func(*args, **(kwargs or {}))


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(12, 24), torch.nn.Tanh(), torch.nn.Linear(24, 3))


def _step(model, opt, i):
    x = torch.randn(8, 12, generator=torch.Generator().manual_seed(i))
    model(x).pow(2).mean().backward()
    opt.step()
    opt.zero_grad()


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_host_steps_one_parameter_at_a_time_as_the_users_optimizer(name):
    model = _model()
    ref = copy.deepcopy(model)
    # the reference: the user's optimizer on a CPU (capturable only where a graph can run: off)
    ref_opt = OPTIMIZERS[name](ref.parameters())
    for g in ref_opt.param_groups:
        g["capturable"] = False
    model, opt = mhc_torch.apply(model, OPTIMIZERS[name](model.parameters()), HOST)
    for i in range(3):
        ops = _OpNames()
        with ops:
            _step(model, opt, i)
        _step(ref, ref_opt, i)
        assert not [n for n in ops.names if "_foreach_" in n]
    for p, q in zip(model.parameters(), ref.parameters()):
        if name in BITWISE:
            assert torch.equal(p, q)
        else:
            torch.testing.assert_close(p, q, rtol=1e-6, atol=1e-7)


def test_host_keeps_a_custom_class_and_the_settings_impl():
    """A class of the user's own steps as it is written (its foreach kept: the prediction takes
    its recorded step's temporaries); a setting's impl is what the host copies step with."""
    class MyAdam(torch.optim.Adam):
        pass
    _, opt = mhc_torch.apply(_model(), MyAdam(_model().parameters(), lr=1e-2, foreach=True), HOST)
    assert opt.param_groups[0]["foreach"] is True
    setting = {"optimizer": {"state": "host", "impl": "foreach"}}
    _, opt = mhc_torch.apply(_model(), torch.optim.Adam(_model().parameters(), lr=1e-2), setting)
    assert opt.param_groups[0]["foreach"] is True
