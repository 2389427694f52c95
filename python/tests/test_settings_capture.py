"""Captures with settings applied (mhc_torch.apply on fake tensors): the memory each setting
moves, worked out by hand on a tiny model (settings_net.py), and the tables settings need (modules,
the kernels' modules, saved tensors and who saved them, recompute, host memory)."""
import json
import subprocess

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import mhc_torch  # noqa: E402
from mhc_torch import store  # noqa: E402
from settings_net import (  # noqa: E402
    A, _activations_at_backward, _alloc_order, BASELINE, _capture, _copies, _host, _live, NET_FILE, PARAMS,
    _predicted_and_captured, _recomputed, _rows, X,
)
from tiny_models import Net  # noqa: E402

@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    return _capture(tmp_path_factory.mktemp("base"), None)


def test_modules_and_kernel_modules(baseline):
    mods = _rows(baseline, "SELECT m.id, n.text, m.parent, t.text FROM modules m JOIN strings n ON n.id = m.name "
                           "JOIN strings t ON t.id = m.type ORDER BY m.id")
    assert mods[:5] == [(1, "Net", 0, "Net"), (2, "Net.blocks", 1, "ModuleList"), (3, "Net.blocks.0", 2, "Block"),
                        (4, "Net.blocks.1", 2, "Block"), (5, "Net.blocks.2", 2, "Block")]
    assert mods[5:] == [(6, "Net.blocks.0.fc1", 3, "Linear"), (7, "Net.blocks.0.fc2", 3, "Linear"),
                        (8, "Net.blocks.1.fc1", 4, "Linear"), (9, "Net.blocks.1.fc2", 4, "Linear"),
                        (10, "Net.blocks.2.fc1", 5, "Linear"), (11, "Net.blocks.2.fc2", 5, "Linear")]
    fwd = _rows(baseline, "SELECT s.text, coalesce(ms.text, '') FROM kernels k JOIN kernel_info i ON i.kernel = k.id "
                          "JOIN strings s ON s.id = k.name LEFT JOIN modules m ON m.id = i.module "
                          "LEFT JOIN strings ms ON ms.id = m.name WHERE i.phase = 0 ORDER BY k.id")
    assert fwd == [k for b in range(3) for k in (("aten::mm", f"Net.blocks.{b}.fc1"), ("aten::relu", f"Net.blocks.{b}"),
                                                 ("aten::mm", f"Net.blocks.{b}.fc2"))] + [("aten::sum", "")]


def test_saved_tensors_and_who_saved_them(baseline):
    """Each saved storage with the forward op that saved it: relu's output twice (relu saves its
    output after running, fc2 its input before running), weights only where the input needs a
    gradient, the batch by block 0's fc1."""
    rows = _rows(baseline, "SELECT coalesce(la.text, ''), a.bytes, k.id, ms.text FROM saved_tensors st "
                           "JOIN allocations a ON a.id = st.allocation LEFT JOIN strings la ON la.id = a.label "
                           "JOIN kernels k ON k.id = st.kernel JOIN kernel_info i ON i.kernel = k.id "
                           "JOIN modules m ON m.id = i.module JOIN strings ms ON ms.id = m.name ORDER BY k.id, a.id")
    expected = [("batch", X, 1, "Net.blocks.0.fc1"), ("Net.blocks.0:aten::relu", A, 2, "Net.blocks.0"),
                ("blocks.0.fc2.weight", 4096, 3, "Net.blocks.0.fc2"), ("Net.blocks.0:aten::relu", A, 3, "Net.blocks.0.fc2")]
    for b in (1, 2):
        k = 3 * b + 1
        expected += [(f"blocks.{b}.fc1.weight", 4096, k, f"Net.blocks.{b}.fc1"),
                     (f"Net.blocks.{b - 1}.fc2:aten::mm", X, k, f"Net.blocks.{b}.fc1"),
                     (f"Net.blocks.{b}:aten::relu", A, k + 1, f"Net.blocks.{b}"),
                     (f"blocks.{b}.fc2.weight", 4096, k + 2, f"Net.blocks.{b}.fc2"),
                     (f"Net.blocks.{b}:aten::relu", A, k + 2, f"Net.blocks.{b}.fc2")]
    assert rows == expected


def test_saves_of_one_storage_are_counted(tmp_path):
    """q and k, two halves (views) of one projection's output, saved by the op that multiplies
    them: one row, two packs (what a streamed offload counts)."""
    class Gate(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(16, 32, bias=False)

        def forward(self, x):
            q, k = self.fc(x).chunk(2, dim=-1)
            return q * k

    path = str(tmp_path / "gate.db")
    mhc_torch.capture(Gate, lambda: (torch.randn(8, 16),), path=path, autocast_dtype=None,
                      loss_fn=lambda m, b: m(*b).sum())
    rows = _rows(path, "SELECT coalesce(la.text, ''), s.text, st.packs FROM saved_tensors st JOIN allocations a "
                       "ON a.id = st.allocation LEFT JOIN strings la ON la.id = a.label JOIN kernels k ON k.id = st.kernel "
                       "JOIN strings s ON s.id = k.name ORDER BY k.id")
    assert rows == [("batch", "aten::mm", 1), ("Gate.fc:aten::mm", "aten::mul", 2)]


def test_baseline_by_hand(baseline):
    assert _activations_at_backward(baseline) == BASELINE
    assert _recomputed(baseline) == [] and _copies(baseline) == [] and _host(baseline) == {}


def test_checkpoint_block_recomputes_it_in_the_backward(tmp_path, mhc_exe):
    """Block 1 checkpointed: its relu output a1 is not kept (-8192 B); its input x1 is (the
    recompute reads it). The backward re-runs fc1 and relu (phase recompute); fc2 is not re-run:
    PyTorch stops the recompute once the backward has all it saved (fc2 saves before it runs)."""
    path = _capture(tmp_path, {"checkpoint": {"modules": ["Net.blocks.1"]}})
    assert _activations_at_backward(path) == BASELINE - A
    assert _recomputed(path) == [("aten::mm", "Net.blocks.1.fc1"), ("aten::relu", "Net.blocks.1")]
    assert store.read_meta(path)["capture.setting"] == '{"checkpoint":{"modules":["Net.blocks.1"]}}'  # as given
    assert subprocess.run([mhc_exe, "check", path], capture_output=True).returncode == 0


def test_saves_inside_checkpointed_regions_are_recorded(tmp_path, baseline):
    """What a checkpointed module's forward saves (to the checkpoint, which keeps none of it) is
    recorded as in the baseline, and not its recompute's saves; the checkpoint's own save of the
    region's input x1 is block 1's fc1 saving it, as in the baseline."""
    path = _capture(tmp_path, {"checkpoint": {"modules": ["Net.blocks.1"]}})
    pairs = "SELECT allocation, kernel FROM saved_tensors ORDER BY 1, 2"
    assert _rows(path, pairs) == _rows(baseline, pairs)


def test_selective_checkpoint_keeps_matmul_outputs(tmp_path):
    """save_matmuls on block 1: fc1's output h1 is kept (a matmul's), relu's output a1 is not,
    so this block keeps as much as before (+8192 -8192); only relu is recomputed."""
    path = _capture(tmp_path, {"checkpoint": {"modules": ["Net.blocks.1"], "policy": "save_matmuls"}})
    assert _activations_at_backward(path) == BASELINE
    assert _recomputed(path) == [("aten::relu", "Net.blocks.1")]


def test_sync_offload_moves_saved_tensors_to_the_host(tmp_path, mhc_exe):
    """min_bytes 4096: the three relu outputs go to the host (device -1, one copy of each storage
    though each is saved twice); the 2048-byte block outputs and the weights stay. The backward
    makes one device copy of each, which both of its uses get: 3 copies host-to-device."""
    path = _capture(tmp_path, {"offload": {"mode": "sync", "min_bytes": 4096}})
    assert _activations_at_backward(path) == BASELINE - 3 * A
    assert _host(path) == {"activation": 3 * A}
    assert _copies(path) == [(store.H2D, 0, 3, 3 * A), (store.D2H, 0, 3, 3 * A)]
    meta = store.read_meta(path)
    assert int(meta["capture.host_peak_bytes"]) == 3 * A
    chk = subprocess.run([mhc_exe, "check", path], capture_output=True, text=True)
    assert chk.returncode == 0, chk.stdout + chk.stderr


@pytest.mark.parametrize("stash, kept", [(1, 0), (5, A), (8, 2 * A)])
def test_streamed_offload_stash(tmp_path, stash, kept):
    """Streamed: a device storage stays stashed until max_fwd_stash more saves have happened or the
    backward starts. a0, a1, a2 are first saved as saves 1, 6, 11 of 14 (0-13): with 1, each is
    dropped at the next save; with 5, a0 at save 6 and a1 at 11, a2 stays to the end; with 8, a0 at
    save 9, and a1 and a2 stay."""
    path = _capture(tmp_path, {"offload": {"mode": "streamed", "min_bytes": 4096, "max_fwd_stash": stash}})
    assert _activations_at_backward(path) == BASELINE - 3 * A + kept
    assert _copies(path) == [(store.H2D, 1, 3, 3 * A), (store.D2H, 1, 3, 3 * A)]


def test_streamed_offload_prefetch(tmp_path):
    """Unpacking save 13 (a2, block 2's fc2) with prefetch 5 also copies back saves 12-8: save 8 is
    a1, so block 1's storage is on the device again while block 2's relu backward runs."""
    live, a1_back = {}, {}
    for p in (0, 5):
        path = _capture(tmp_path, {"offload": {"mode": "streamed", "min_bytes": 4096, "max_fwd_stash": 1,
                                               "prefetch": p}}, f"p{p}.db")
        relu_bw = _rows(path, "SELECT min(k.t_start) FROM kernels k JOIN strings s ON s.id = k.name "
                              "WHERE s.text = 'aten::threshold_backward'")[0][0]
        live[p] = _live(path, relu_bw, "device >= 0")
        a1_back[p] = _rows(path, "SELECT t_start FROM copies WHERE kind = 0 ORDER BY t_start")[1][0] < relu_bw
    assert live[5] - live[0] == A
    assert a1_back == {0: False, 5: True}


def test_streamed_stash_let_go_only_at_an_offloaded_save(tmp_path, mhc_exe):
    """torchtune's OffloadActivations (whose stash rule the printed hooks follow) lets go of its stash only when
    it packs a tensor it offloads; saves it keeps as they are (weights, tensors under min_bytes)
    count toward max_fwd_stash but release nothing. With max_fwd_stash 3: a0 (save 1) is let go
    at save 6 (a1, block 1's relu output, packed after relu ran), not at save 4 (block 1's fc1
    weight, packed before fc1 ran), so a0 is still on the device while block 1's fc1 and relu run.
    mhc_torch.apply (--verify) let go at every save, and so did the prediction: both freed a0
    before block 1's fc1. The prediction allocates and frees in the captured order."""
    setting = {"offload": {"mode": "streamed", "min_bytes": 4096, "max_fwd_stash": 3, "prefetch": 0}}
    doc, captured = _predicted_and_captured(tmp_path, mhc_exe, NET_FILE, setting, steps=2)
    path = str(tmp_path / "set.db")
    relu = _rows(path, "SELECT k.t_start, k.t_end FROM kernels k JOIN strings s ON s.id = k.name "
                       "WHERE s.text = 'aten::relu' AND k.step = 1 ORDER BY k.t_start")
    a0_freed = _rows(path, "SELECT a.t_free FROM allocations a JOIN strings s ON s.id = a.label "
                           "WHERE a.device >= 0 AND s.text = 'Net.blocks.0:aten::relu' AND a.t_alloc >= ? "
                           "ORDER BY a.t_alloc", (relu[0][0],))[0][0]
    assert a0_freed >= relu[1][1]   # after block 1's relu ran
    assert doc["rows"][0]["peak_bytes"] == captured.peak_bytes
    pred = tmp_path / "pred.db"
    out = subprocess.run([mhc_exe, "advise", str(tmp_path / "base.db"), "--setting", json.dumps(setting),
                          "--trace-out", str(pred)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert _alloc_order(str(pred)) == _alloc_order(path)


def test_offloaded_storage_kept_by_another_save_is_not_copied_back(tmp_path):
    """Offloading fc2 of block 1 only: fc2 saves its input a1, which relu (outside fc2) saves too,
    so a1 stays on the device; the backward uses it as it is: one copy to the host, none back."""
    path = _capture(tmp_path, {"offload": {"mode": "sync", "modules": ["Net.blocks.1.fc2"], "min_bytes": 4096}})
    assert _activations_at_backward(path) == BASELINE
    assert _copies(path) == [(store.D2H, 0, 1, A)]
    dropped = _rows(path, "SELECT a.t_free FROM allocations a WHERE a.device = -1")[0][0]
    assert dropped is not None and dropped <= _rows(path, "SELECT max(t_end) FROM kernels")[0][0]


def test_optimizer_state_on_the_host(tmp_path):
    """AdamW's state (exp_avg, exp_avg_sq and a 4-byte step per parameter), the host copy of the
    parameters and of their gradients are host memory; the device holds no gradient after its
    backward op and no optimizer state; the step runs on the host (no optimizer kernels)."""
    base = _capture(tmp_path, None, "base.db")
    path = _capture(tmp_path, {"optimizer": {"state": "host"}})
    assert _host(path) == {"param": PARAMS, "grad": PARAMS, "optimizer": 2 * PARAMS + 6 * 4,
                           "workspace": 2 * PARAMS}  # the for-loop's sqrt(exp_avg_sq) and quotient, each weight's
    # The gradient buffers are allocated once and kept.
    assert _rows(path, "SELECT count(*) FROM allocations WHERE device = -1 AND category = 1 AND t_free IS NULL") == [(6,)]
    assert _rows(path, "SELECT count(*) FROM allocations WHERE device >= 0 AND category IN (1, 2)") == [(0,)]
    assert _rows(path, "SELECT count(*) FROM kernel_info WHERE phase = 2") == [(0,)]
    assert _copies(path) == [(store.H2D, 0, 6, PARAMS), (store.D2H, 1, 6, PARAMS)]
    assert int(mhc_torch.read_meta(path)["capture.peak_bytes"]) < int(mhc_torch.read_meta(base)["capture.peak_bytes"])
    # The host's peak is in the step, in the order the host ran it: master copies, gradient
    # buffers, state and the step counters, and the for-loop's tensors at their most: a weight's
    # sqrt(exp_avg_sq) and quotient beside the previous weight's quotient (the user's foreach=True
    # is not kept on the host copies: until 2026-12-07 all six square roots, 5 x PARAMS + 24 B, and
    # the step's increment, PARAMS + 4 B of workspace in all); the trace's events
    # say the same (each host op takes a nanosecond, so its temporaries are not made and freed
    # at one instant, which readers would count one at a time).
    assert int(mhc_torch.read_meta(path)["capture.host_peak_bytes"]) == 4 * PARAMS + 6 * 4 + 3 * PARAMS // 6
    sqrt_made, sqrt_freed = _rows(path, "SELECT min(t_alloc), min(t_free) FROM allocations a JOIN strings s "
                                        "ON s.id = a.label WHERE a.device = -1 AND s.text = 'aten::sqrt'")[0]
    assert sqrt_freed > sqrt_made
    # One optimizer range (its step() calls the optimizer class's own: the capture's step hooks run
    # at both levels): the host's ops, then the parameters' copies back to the device.
    ranges = _rows(path, "SELECT m.t_start, m.t_end FROM markers m JOIN strings s ON s.id = m.name "
                         "WHERE s.text = 'optimizer'")
    (first, last), = _rows(path, "SELECT min(t_start), max(t_end) FROM copies WHERE kind = ?", (store.H2D,))
    assert len(ranges) == 1 and ranges[0][0] < first and ranges[0][1] == last


def test_bf16_weights(tmp_path):
    """bf16 weights under bf16 autocast: parameters, gradients and AdamW's moments take half the
    bytes (the step counters stay 4-byte fp32), and the forward no longer casts the six weights
    to bf16, whose copies five matmuls saved (block 0's fc1 does not save its weight): 5 x 2048 B
    fewer activations. The two casts left are the batch's and the loss's."""
    def run(setting, name):
        path = str(tmp_path / name)
        mhc_torch.capture(Net, lambda: (torch.randn(32, 16),), steps=1, path=path, autocast_dtype=torch.bfloat16,
                          loss_fn=lambda m, b: m(*b).float().sum(), setting=setting)
        cats = dict(_rows(path, "SELECT c.name, sum(a.bytes) FROM allocations a JOIN categories c ON c.id = a.category "
                                "WHERE a.device >= 0 GROUP BY 1"))
        casts = _rows(path, "SELECT count(*) FROM kernels k JOIN strings s ON s.id = k.name JOIN kernel_info i "
                            "ON i.kernel = k.id WHERE s.text = 'aten::_to_copy' AND i.phase = 0")[0][0]
        return cats, casts, _activations_at_backward(path)

    cats0, casts0, act0 = run(None, "fp32.db")
    cats1, casts1, act1 = run({"weights": "bf16"}, "bf16.db")
    assert (cats0["param"], cats0["grad"], cats0["optimizer"]) == (PARAMS, PARAMS, 2 * PARAMS + 6 * 4)
    assert (cats1["param"], cats1["grad"], cats1["optimizer"]) == (PARAMS // 2, PARAMS // 2, PARAMS + 6 * 4)
    assert (casts0, casts1) == (8, 2)
    assert act0 - act1 == 5 * 64 * 16 * 2


def test_bf16_weights_setting_is_the_weights_option(tmp_path):
    """A setting's "weights": "bf16" (cast inside mhc_torch.apply, after the optimizer is built)
    and the capture's own bf16 weights (param_dtype, `--weights bf16`: before it) are one cast:
    the same trace, and meta capture.param_dtype says bf16 for both."""
    paths = [str(tmp_path / "setting.db"), str(tmp_path / "option.db")]
    for path, kwargs in zip(paths, ({"setting": {"weights": "bf16"}}, {"param_dtype": torch.bfloat16})):
        mhc_torch.capture(Net, lambda: (torch.randn(32, 16),), steps=2, path=path, autocast_dtype=torch.bfloat16,
                          loss_fn=lambda m, b: m(*b).float().sum(), **kwargs)
    # A storage freed when the capture ends counts as alive at the end (when its last reference
    # goes then depends on Python's garbage collector).
    end = "(SELECT max(t_end) FROM markers)"
    allocations = (f"SELECT id, device, bytes, t_alloc, min(coalesce(t_free, {end}), {end}), category, label "
                   "FROM allocations ORDER BY 1")
    tables = [[_rows(p, q) for q in (allocations, "SELECT * FROM kernels ORDER BY 1", "SELECT * FROM accesses ORDER BY 1, 2")]
              for p in paths]
    assert tables[0] == tables[1]
    assert [mhc_torch.read_meta(p)["capture.param_dtype"] for p in paths] == ["bfloat16", "bfloat16"]


def test_mhc_policy_recomputes_the_maps_only(tmp_path, preset_capture):
    """The mhc policy on a tiny mHC model checkpoints each hyper-connection's maps: every
    recomputed kernel runs inside a `maps` module (not attention, the MLP or the stream mixing),
    the Sinkhorn-Knopp iterations are among them (PyTorch stops recomputing once it has what the
    backward needs), and what the backward no longer keeps is
    exactly the storages that only the maps' ops saved (made inside them: not their input)."""
    from mhc_torch.models import preset

    build, make_batch, loss_fn, _ = preset("tiny-mhc", batch=1, seq=16, layers=2, hc=4)
    # the step without the setting: the same capture as test_frame_holds_mhc's (conftest.preset_capture)
    paths = {"base": preset_capture(tmp_path, "tiny-mhc", batch=1, seq=16, layers=2, hc=4)[0],
             "mhc": str(tmp_path / "mhc.db")}
    mhc_torch.capture(build, make_batch, steps=1, path=paths["mhc"], loss_fn=loss_fn,
                      setting={"checkpoint": {"modules": ["MhcTransformer"], "policy": "mhc"}})
    # Attention runs inside the connection's forward (its sublayer) but is not part of it.
    sdpa = _rows(paths["base"], "SELECT DISTINCT ms.text FROM kernels k JOIN kernel_info i ON i.kernel = k.id "
                                "JOIN strings s ON s.id = k.name JOIN modules m ON m.id = i.module "
                                "JOIN strings ms ON ms.id = m.name WHERE s.text LIKE '%scaled_dot_product%' ORDER BY 1")
    assert sdpa == [("MhcTransformer.layers.0.attn",), ("MhcTransformer.layers.1.attn",)]
    mods = _rows(paths["mhc"], "SELECT DISTINCT ms.text FROM kernel_info i JOIN modules m ON m.id = i.module "
                               "JOIN strings ms ON ms.id = m.name WHERE i.phase = 3")
    assert mods and all(".maps" in m for (m,) in mods)
    divs = _rows(paths["mhc"], "SELECT count(*) FROM kernels k JOIN kernel_info i ON i.kernel = k.id "
                               "JOIN strings s ON s.id = k.name WHERE s.text = 'aten::div' AND i.phase = 3")[0][0]
    # 2 layers x 2 connections x 20 iterations x (rows, columns), but for the last division of
    # each: it saves its inputs before it runs, and then the backward has all it needs.
    assert divs == 2 * 2 * (20 * 2 - 1)
    in_maps = ("(SELECT i.kernel FROM kernel_info i JOIN modules m ON m.id = i.module JOIN strings s ON s.id = m.name "
               "WHERE s.text LIKE '%.maps' OR s.text LIKE '%.maps.%')")
    only_maps = _rows(paths["base"], f"""
        SELECT coalesce(sum(a.bytes), 0) FROM allocations a WHERE a.id IN (SELECT allocation FROM saved_tensors
          WHERE kernel IN {in_maps}) AND a.id NOT IN (SELECT allocation FROM saved_tensors WHERE kernel NOT IN {in_maps})
          AND a.id IN (SELECT allocation FROM accesses WHERE mode = 2 AND kernel IN {in_maps})""")[0][0]
    assert only_maps > 0
    assert _activations_at_backward(paths["base"]) - _activations_at_backward(paths["mhc"]) == only_maps


class SoftBlock(nn.Module):
    """fc2(softmax(fc1(x))): under CUDA's autocast lists the matmuls run in bf16 and the softmax in
    fp32 (CPU's lists would leave it in bf16)."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(16, 64, bias=False), nn.Linear(64, 16, bias=False)

    def forward(self, x):
        return self.fc2(torch.softmax(self.fc1(x), dim=-1))


class SoftNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(SoftBlock() for _ in range(2))

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x


def _written(path, phase, module_prefix):
    """(op, bytes it wrote) of the kernels of a phase inside a module, in order."""
    return _rows(path, "SELECT s.text, coalesce(sum(a.bytes), 0) FROM kernels k JOIN kernel_info i ON i.kernel = k.id "
                       "JOIN strings s ON s.id = k.name JOIN modules m ON m.id = i.module JOIN strings ms ON ms.id = m.name "
                       "LEFT JOIN accesses x ON x.kernel = k.id AND x.mode = 2 LEFT JOIN allocations a ON a.id = x.allocation "
                       "WHERE i.phase = ? AND (ms.text = ? OR ms.text LIKE ?) GROUP BY k.id ORDER BY k.id",
                 (phase, module_prefix, module_prefix + ".%"))


def test_checkpoint_recompute_under_cuda_autocast(tmp_path):
    """A checkpointed block under bf16 autocast with CUDA's lists: the backward's recompute casts
    as the forward did (checkpoint compares them and raised CheckpointError when the recompute got
    CPU's lists), so it writes the same ops and bytes: the bf16 weight casts (64 x 16 x 2 =
    2048 B), fc1's bf16 output (32 x 64 x 2 = 4096 B), the softmax in fp32 (its input cast, then
    the softmax: 32 x 64 x 4 = 8192 B each), fc2's weight cast and then its input cast back to bf16
    (4096 B: autocast casts the last argument first, as GCC-built CUDA autocast does). And the
    weight casts the recompute caches die when its autocast region ends, as on a GPU: nothing it
    made is alive when the optimizer runs."""
    path = str(tmp_path / "soft.db")
    mhc_torch.capture(SoftNet, lambda: (torch.randn(32, 16),), steps=1, path=path, autocast_dtype=torch.bfloat16,
                      loss_fn=lambda m, b: m(*b).sum(), setting={"checkpoint": {"modules": ["SoftNet.blocks.1"]}})
    forward = _written(path, store.FORWARD, "SoftNet.blocks.1")
    recompute = _written(path, store.RECOMPUTE, "SoftNet.blocks.1")
    assert forward == [("aten::_to_copy", 2048), ("aten::mm", 4096), ("aten::_to_copy", 8192), ("aten::_softmax", 8192),
                       ("aten::_to_copy", 2048), ("aten::_to_copy", 4096), ("aten::mm", 1024)]
    # It stops once it has what the backward needs: fc2's inputs (the mm saves them before it runs).
    assert recompute == forward[:-1]
    optimizer_start = _rows(path, "SELECT min(k.t_start) FROM kernels k JOIN kernel_info i ON i.kernel = k.id "
                                  "WHERE i.phase = 2")[0][0]
    alive = _rows(path, "SELECT count(*) FROM allocations a WHERE a.id IN (SELECT x.allocation FROM accesses x "
                        "JOIN kernel_info i ON i.kernel = x.kernel WHERE i.phase = 3 AND x.mode = 2) "
                        "AND (a.t_free IS NULL OR a.t_free > ?)", (optimizer_start,))[0][0]
    assert alive == 0



def test_checkpoints_pack_hook_known_unmarked_as_in_torch_2_11():
    """torch 2.11's checkpoint pack hook carries no _checkpoint_internal mark: the saves of a
    checkpointed region went unrecorded there (the test above failed on 2.11). Its hook is
    torch.utils.checkpoint's `_checkpoint_hook.__init__.<locals>.pack_hook`."""
    from mhc_torch.checkpointing import _is_checkpoints_pack_hook

    def pack_hook(x):
        return x

    pack_hook.__module__ = "torch.utils.checkpoint"
    pack_hook.__qualname__ = "_checkpoint_hook.__init__.<locals>.pack_hook"
    assert _is_checkpoints_pack_hook(pack_hook)
    pack_hook.__module__ = __name__   # a hook of the user's own, with the same name
    assert not _is_checkpoints_pack_hook(pack_hook)


class _IdentitySkip(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.skip = nn.Linear(16, 16), nn.Linear(16, 16), nn.Identity()

    def forward(self, x):
        h = self.fc1(x)
        return self.fc2(h) + self.skip(h)


def test_identity_module_backward_leaves_no_module_running(tmp_path):
    """ModTracker sees an nn.Identity's backward begin (its output is its input) but never end:
    the capture kept it running after the backward, so the optimizer's kernels and the next step's
    loss (ops outside every module) were put in it (the diffusion UNet's down.0.skip), and an
    offload of the whole forward counted the loss's saves as the model's."""
    path = str(tmp_path / "id.db")
    mhc_torch.capture(_IdentitySkip, lambda: (torch.randn(32, 16),), steps=2, path=path, autocast_dtype=None,
                      loss_fn=lambda m, b: m(*b).sum())
    rows = _rows(path, "SELECT k.step, i.phase, coalesce(ms.text, ''), s.text FROM kernels k "
                       "JOIN kernel_info i ON i.kernel = k.id JOIN strings s ON s.id = k.name "
                       "LEFT JOIN modules m ON m.id = i.module LEFT JOIN strings ms ON ms.id = m.name")
    assert {m for _, phase, m, _ in rows if phase == 2} == {""}   # the optimizer, in both steps
    assert {(step, m) for step, phase, m, name in rows if phase == 0 and name == "aten::sum"} == {(0, ""), (1, "")}


class MadeInForward(nn.Module):
    """Most of the forward's work runs in modules the forward makes on each call (an nn.Sequential
    of activations): recorded as "MadeInForward.Sequential.0", ..., which model.get_submodule
    cannot resolve."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(256, 256)

    def forward(self, x):
        stack = nn.Sequential(*[nn.GELU() for _ in range(6)])
        return stack(self.proj(x))


def test_modules_made_in_forward_are_never_named(tmp_path, mhc_exe):
    """Such modules were the model's blocks ("6 blocks (MadeInForward.Sequential)": the planner's
    checkpoint code would name 'Sequential.0', ..., which get_submodule cannot resolve), and a
    setting naming one was predicted although mhc_torch.apply (so --verify) refuses it. Now the
    capture records who made them (meta capture.unregistered_modules), they are never blocks, and a
    setting naming one is one line saying which registered module to name instead."""
    path = str(tmp_path / "made.db")
    r = mhc_torch.capture(MadeInForward, lambda: (torch.randn(4096, 256),), steps=1, path=path, autocast_dtype=None,
                          loss_fn=lambda m, b: m(*b).sum())
    made = json.loads(r.meta["capture.unregistered_modules"])
    assert made["MadeInForward.Sequential"] == "MadeInForward"
    assert made["MadeInForward.Sequential.5"] == "MadeInForward"
    out = subprocess.run([mhc_exe, "advise", path, "--capacity", "110MiB"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].endswith("no blocks, 1 step")   # "6 blocks (MadeInForward.Sequential)", then "0 blocks ()"
    # What blocks are and how to name a module instead ("0 blocks ()" and nothing more before).
    assert lines[1].startswith("note       no blocks: the search checkpoints and offloads blocks")
    assert "--setting" in lines[1]
    assert "MadeInForward.Sequential" not in out.stdout   # named nowhere, the note included
    bad = subprocess.run([mhc_exe, "advise", path, "--setting",
                          json.dumps({"checkpoint": {"modules": ["MadeInForward.Sequential.0"]}})],
                         capture_output=True, text=True)
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [
        "mhc: --setting: '" + json.dumps({"checkpoint": {"modules": ["MadeInForward.Sequential.0"]}}) + "': "
        "field 'checkpoint.modules': module 'MadeInForward.Sequential.0' is made inside the forward of "
        "'MadeInForward' on each call, not registered under the model (model.get_submodule cannot reach it); name "
        "'MadeInForward' instead"]
