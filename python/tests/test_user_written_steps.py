"""Training steps written as a new user writes them for the GPU (bench/advise/new_user, 2026-12-05):
the model's own autocast, sparse gradients, ... Each test fails without the fix it guards."""
import pytest

torch = pytest.importorskip("torch")

import mhc_torch  # noqa: E402


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 256))


def _batch():
    return (torch.randn(512, 256),)


def _capture(tmp_path, name, step):
    return mhc_torch.capture(_mlp, _batch, steps=1, path=str(tmp_path / f"{name}.db"), step=step)


def _step_with(region):
    def step(model, batch, run):
        with region():
            loss = model(*batch).float().pow(2).mean()
        loss.backward()
        run.optimizer_step()
        run.zero_grad()
    return step


def test_torch_autocast_cuda_in_the_users_step_casts_as_on_a_gpu(tmp_path):
    """`with torch.autocast("cuda", dtype=torch.bfloat16)` in a step of one's own was disabled by
    torch without a GPU ("CUDA is not available ... Disabling autocast"): DeiT's accumulation loop
    (bench/advise/new_user/deit_accum.py) was captured in fp32. Now it is the capture's autocast:
    the same peak and kernels as the step with run.autocast(); fp16 where torch.cuda.amp.autocast()
    gives no dtype (CUDA's default), the keyword form too, and enabled=False is an fp32 island."""
    ref = _capture(tmp_path, "ref", lambda m, b, run: _step_with(run.autocast)(m, b, run))
    fp32 = mhc_torch.capture(_mlp, _batch, steps=1, path=str(tmp_path / "fp32.db"), autocast_dtype=None)
    # working: the first Linear's output is 512 x 1024 activations; bf16 (2 B) under autocast,
    # fp32 (4 B) without: the two peaks differ, and the user's autocast must give the bf16 one
    assert ref.peak_bytes != fp32.peak_bytes
    user = _capture(tmp_path, "user", _step_with(lambda: torch.autocast("cuda", dtype=torch.bfloat16)))
    assert (user.peak_bytes, user.kernels) == (ref.peak_bytes, ref.kernels)
    keyword = _capture(tmp_path, "kw", _step_with(lambda: torch.amp.autocast(device_type="cuda",
                                                                              dtype=torch.bfloat16)))
    assert (keyword.peak_bytes, keyword.kernels) == (ref.peak_bytes, ref.kernels)
    fp16_ref = mhc_torch.capture(_mlp, _batch, steps=1, path=str(tmp_path / "fp16.db"), autocast_dtype=torch.float16,
                                 step=lambda m, b, run: _step_with(run.autocast)(m, b, run))
    with pytest.warns(FutureWarning):  # torch.cuda.amp.autocast is deprecated; it still runs
        legacy = _capture(tmp_path, "legacy", _step_with(lambda: torch.cuda.amp.autocast()))
    assert (legacy.peak_bytes, legacy.kernels) == (fp16_ref.peak_bytes, fp16_ref.kernels)

    def island():
        stack = __import__("contextlib").ExitStack()
        stack.enter_context(torch.autocast("cuda", dtype=torch.bfloat16))
        stack.enter_context(torch.autocast("cuda", enabled=False))
        return stack
    off = _capture(tmp_path, "off", _step_with(island))
    plain = mhc_torch.capture(_mlp, _batch, steps=1, path=str(tmp_path / "plain.db"), autocast_dtype=None,
                              step=lambda m, b, run: _step_with(run.autocast)(m, b, run))
    assert (off.peak_bytes, off.kernels) == (plain.peak_bytes, plain.kernels)
    assert not torch.is_autocast_enabled("cpu")  # nothing left switched on after the capture

