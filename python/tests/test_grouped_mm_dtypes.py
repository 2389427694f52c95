"""aten._grouped_mm (transformers' default "grouped_mm" experts) on fp32 and fp16 inputs, which
CUDA runs through its fallback: torch 2.11's meta kernel refused them ("Expected inputs of BF16
type", the fast path's check), so a mixture-of-experts model with fp32 experts stopped the capture
under torch 2.11 only (python/mhc_torch/gpu_paths.py grouped_mm_as_on_gpu). Fails without the fix
under torch 2.11 (/tmp/v211 in this project's sessions; the H200 machine's torch)."""
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import mhc_torch  # noqa: E402

pytestmark = pytest.mark.skipif(not hasattr(torch.nn.functional, "grouped_mm"), reason="torch without F.grouped_mm")


class Experts(nn.Module):
    def __init__(self, dtype):
        super().__init__()
        self.up = nn.Parameter(torch.randn(2, 16, 24, dtype=dtype))

    def forward(self, x):
        offs = torch.tensor([40, 64], dtype=torch.int32)   # 40 tokens to expert 0, 24 to expert 1
        return torch.nn.functional.grouped_mm(x, self.up, offs=offs)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_grouped_mm_of_other_dtypes_captures_as_cuda_runs_it(tmp_path, dtype):
    path = str(tmp_path / "experts.db")
    mhc_torch.capture(lambda: Experts(dtype), lambda: (torch.randn(64, 16, dtype=dtype),), steps=1, path=path,
                      autocast_dtype=None, loss_fn=lambda m, b: m(*b).float().sum())
    a = mhc_torch.read_table(path, "allocations")
    out = a[a.label.str.endswith("aten::_grouped_mm") & (a.category_name != "param")]
    # the forward's output: 64 tokens x 24 in the inputs' dtype
    assert (64 * 24 * torch.finfo(dtype).bits // 8) in set(out.bytes), sorted(set(out.bytes))
