"""Recurrent layers captured as a GPU runs them (python/mhc_torch/cudnn_rnn.py): cuDNN's fused RNN,
not the CPU's aten::mkldnn_rnn_layer that fake CPU tensors would take. Each test failed before
(the capture recorded mkldnn_rnn_layer: no reserve space, uncast under autocast, no FLOPs)."""
import json
import sqlite3
import textwrap

import pytest

torch = pytest.importorskip("torch")

import mhc_torch  # noqa: E402
from mhc_torch.cli import main  # noqa: E402

# batch 3 x 5 steps, input 8, hidden 16, two layers, batch_first
B, T, I, H, L = 3, 5, 8, 16, 2
PARAMS = 4 * H * I + 4 * H * H + 8 * H + (L - 1) * (4 * H * H + 4 * H * H + 8 * H)  # 3,840 elements


class Lm(torch.nn.Module):
    def __init__(self, mode="LSTM"):
        super().__init__()
        self.rnn = getattr(torch.nn, mode)(I, H, num_layers=L, batch_first=True)
        self.head = torch.nn.Linear(H, 4)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.head(y)


def _capture(path, mode="LSTM", autocast=None):
    return mhc_torch.capture(lambda: Lm(mode), lambda: (torch.randn(B, T, I),), path=path, autocast_dtype=autocast,
                             loss_fn=lambda m, b: m(*b).float().sum())


def _rows(path, sql):
    """sql over views K (kernels) and A (allocations) whose name and label are text."""
    db = sqlite3.connect(path)
    db.execute("CREATE TEMP VIEW K AS SELECT k.id, s.text AS name, k.t_start, k.t_end FROM kernels k "
               "JOIN strings s ON s.id = k.name")
    db.execute("CREATE TEMP VIEW A AS SELECT a.id, a.bytes, a.t_alloc, a.t_free, coalesce(s.text, '') AS label "
               "FROM allocations a LEFT JOIN strings s ON s.id = a.label")
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


def _kernel(path, name):
    rows = _rows(path, f"SELECT id, t_start, t_end FROM K WHERE name = '{name}'")
    assert len(rows) == 1, rows
    return rows[0]


def _written_by(path, kernel_id):
    """(bytes, t_alloc, t_free, label) of the allocations the kernel writes (its outputs)."""
    return _rows(path, "SELECT a.bytes, a.t_alloc, a.t_free, a.label FROM accesses x JOIN A a "
                       f"ON a.id = x.allocation WHERE x.kernel = {kernel_id} AND x.mode = 2 ORDER BY a.id")


def test_lstm_runs_cudnn_with_its_reserve_kept_for_the_backward(tmp_path):
    path = str(tmp_path / "lstm.db")
    _capture(path)
    names = {n for (n,) in _rows(path, "SELECT name FROM K")}
    assert "aten::mkldnn_rnn_layer" not in names
    fwd, bwd = _kernel(path, "aten::_cudnn_rnn"), _kernel(path, "aten::_cudnn_rnn_backward")
    # The reserve (uint8): per step, layer and direction LSTM keeps 4 gates + the cell state (5 x 16),
    # and the inner layer's output (16): (2 x 5 x 16 + 1 x 16) x 15 steps x batch = 2,640 fp32 = 10,560 B,
    # made by the forward and freed after the backward used it.
    reserve = [r for r in _written_by(path, fwd[0]) if r[0] == 10560]
    assert len(reserve) == 1, _written_by(path, fwd[0])
    assert reserve[0][2] is not None and reserve[0][2] >= bwd[2]
    reads = {a for (a,) in _rows(path, f"SELECT allocation FROM accesses WHERE kernel = {bwd[0]} AND mode = 1")}
    assert _rows(path, "SELECT id FROM A WHERE bytes = 10560")[0][0] in reads
    # The output, B x T x 16 fp32 = 960 B, kept for the backward too.
    assert any(r[0] == B * T * H * 4 and r[2] >= bwd[2] for r in _written_by(path, fwd[0]))
    # batch_first: the input copied sequence-first for the kernel's length (480 B), in the
    # backward the input and the output's gradient (480 + 960 B) and zeros for hy's and cy's
    # unused gradients (2 x 3 x 16 fp32 = 384 B each).
    transient = sorted(b for b, t0, t1 in _rows(path, "SELECT bytes, t_alloc, t_free FROM A "
                                                    "WHERE label LIKE 'cuDNN RNN%'"))
    assert transient == [384, 384, 480, 480, 960]
    # The weights' gradient is one flat buffer (the parameters' .grad are views of it): 3,840 x 4 B.
    grads = _rows(path, "SELECT bytes, label FROM A WHERE label LIKE 'rnn.%.grad'")
    # labelled by the module's parameters whose gradients it holds, not by the last one alone
    assert grads == [(PARAMS * 4, "rnn.(weight_ih_l0 … bias_hh_l1: 8 parameters).grad")]


def test_lstm_under_autocast_runs_fp16_with_an_fp16_copy_of_its_weights(tmp_path):
    """AutocastRNN.cpp: fp16 whatever the autocast dtype; the weights copied into a flat fp16
    buffer kept for the backward; each parameter's gradient comes back as its own fp32 tensor."""
    path = str(tmp_path / "lstm16.db")
    _capture(path, autocast=torch.bfloat16)
    fwd, bwd = _kernel(path, "aten::_cudnn_rnn"), _kernel(path, "aten::_cudnn_rnn_backward")
    out = _written_by(path, fwd[0])
    assert any(r[0] == B * T * H * 2 for r in out), out        # fp16 output
    assert any(r[0] == 10560 // 2 for r in out), out           # fp16 reserve
    # the fp16 weights (one tensor each here, slices of one buffer on the GPU), kept for the backward
    copies = _rows(path, f"SELECT bytes, t_free FROM A WHERE label = 'Lm.rnn:aten::empty' AND t_alloc < {fwd[1]}")
    assert sum(b for b, _ in copies) == PARAMS * 2, copies
    assert all(t >= bwd[1] for _, t in copies), copies
    grads = sorted(b for (b,) in _rows(path, "SELECT bytes FROM A WHERE label LIKE 'rnn.%.grad'"))
    assert len(grads) == 8 and sum(grads) == PARAMS * 4


def test_gru_flops_count_the_gates_gemms(tmp_path):
    """GRU: 3 gates; layer 0: 2 x 15 x 3 x 16 x (8 + 16) = 34,560, layer 1: 2 x 15 x 3 x 16 x 32 =
    46,080: 80,640 FLOPs forward, twice that backward (mkldnn_rnn_layer counted none)."""
    path = str(tmp_path / "gru.db")
    _capture(path, mode="GRU")
    flops = dict(_rows(path, "SELECT k.name, i.flops FROM K k JOIN kernel_info i ON i.kernel = k.id "
                             "WHERE k.name LIKE 'aten::_cudnn_rnn%'"))
    assert flops == {"aten::_cudnn_rnn": 80640, "aten::_cudnn_rnn_backward": 161280}
    # GRU's reserve: 6 x 16 per step and layer + the inner output: (2 x 96 + 16) x 15 x 4 B = 12,480 B
    assert _rows(path, "SELECT count(*) FROM A WHERE bytes = 12480")[0][0] == 1


def test_reserve_rule_gives_the_sizes_cudnn_reported():
    """pytorch/pytorch#2895 (P100, fp32): cuDNN's reserve for a 4-layer LSTM and GRU of 320 units
    over 123 inputs was 736,000,000 B and 864,000,000 B. The LSTM's size gives steps x batch =
    736,000,000 / 4 / (4 x 5 x 320 + 3 x 320) = 25,000; the GRU's then follows."""
    from mhc_torch.cudnn_rnn import GRU, LSTM, reserve_bytes

    assert reserve_bytes(LSTM, 25000, 1, 320, 320, 4, 1, 0.0, 4) == 736_000_000
    assert reserve_bytes(GRU, 500, 50, 320, 320, 4, 1, 0.0, 4) == 864_000_000


def test_capture_says_what_is_estimated(tmp_path, capsys):
    model = tmp_path / "lstm.py"
    model.write_text(textwrap.dedent("""
        import torch
        class Lm(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.rnns = torch.nn.ModuleList([torch.nn.LSTM(8, 16, batch_first=True), torch.nn.GRU(16, 16)])
            def forward(self, x):
                x, _ = self.rnns[0](x)
                return self.rnns[1](x)[0]
        def build_model(): return Lm()
        def make_batch(): return (torch.randn(2, 5, 8),)
        def loss_fn(model, batch): return model(*batch).float().mean()
    """))
    out = str(tmp_path / "lstm.db")
    assert main(["capture", str(model), "-o", out]) == 0
    err = capsys.readouterr().err
    assert "note: Lm.rnns.0, Lm.rnns.1 (recurrent layers) captured as cuDNN's RNN kernel" in err, err
    meta = dict(mhc_torch.read_table(out, "meta")[["key", "value"]].values)
    assert json.loads(meta["capture.cudnn_rnn"]) == ["Lm.rnns.0", "Lm.rnns.1"]
    assert meta["capture.cudnn_rnn.estimated"].startswith("reserve space")
    assert "workspaces" in meta["capture.cudnn_rnn.unmodelled"]
    assert "capture.unmodelled_modules" not in meta


def test_real_cpu_rnns_elsewhere_keep_their_path():
    """The kernels act on fake tensors only: a real LSTM run beside the capture is untouched."""
    from mhc_torch.cudnn_rnn import rnn_as_on_gpu

    torch.manual_seed(0)
    m = torch.nn.LSTM(4, 6, batch_first=True)
    x = torch.randn(2, 3, 4)
    want = m(x)[0]
    with rnn_as_on_gpu(True):
        got = m(x)[0]
    assert torch.equal(want, got)


@pytest.mark.parametrize("kind,fused,gates", [("LSTMCell", "aten::_thnn_fused_lstm_cell", 4),
                                              ("GRUCell", "aten::_thnn_fused_gru_cell", 5)])
def test_cells_run_cudas_fused_cell(tmp_path, kind, fused, gates):
    """nn.LSTMCell / nn.GRUCell on a CUDA input: two gate matmuls, then the fused cell, whose
    workspace (batch x 4 hidden; GRU's 5) and the gate matmuls' outputs (batch x 4 or 3 hidden)
    autograd keeps; the CPU composite (sigmoid_, mul, ...) ran before, keeping other tensors."""
    path = str(tmp_path / "cell.db")
    mhc_torch.capture(lambda: getattr(torch.nn, kind)(I, H), lambda: (torch.randn(B, I),), path=path,
                      autocast_dtype=None, loss_fn=lambda m, b: (m(*b)[0] if kind == "LSTMCell" else m(*b)).sum())
    names = [n for (n,) in _rows(path, "SELECT name FROM K")]
    assert "aten::sigmoid_" not in names and "aten::sigmoid" not in names
    fwd = _kernel(path, fused)
    bwd = [k for k in names if k.startswith(fused) and k != fused]
    assert len(bwd) == 1, names
    bwd = _kernel(path, bwd[0])
    workspace = [r for r in _written_by(path, fwd[0]) if r[0] == B * gates * H * 4]
    assert workspace and workspace[0][2] >= bwd[2], _written_by(path, fwd[0])   # kept for the backward
