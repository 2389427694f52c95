"""mhc_torch.apply with real tensors on the CPU: the loss, the gradients and the optimizer's update
are those of the model without the setting: bitwise where the setting changes where memory lives
or when it is computed, not the arithmetic; within a stated tolerance where it changes the
arithmetic (the fused optimizer kernel, bf16 weights). Bad settings: one line naming the key."""
import copy
import json

import pytest

torch = pytest.importorskip("torch")
import mhc_torch  # noqa: E402
from mhc_torch.mhc_model import MhcConfig, MhcTransformer  # noqa: E402

LAYERS = ["MhcTransformer.layers.0", "MhcTransformer.layers.1"]


@pytest.fixture(scope="module")
def mhc_model():
    torch.manual_seed(0)
    cfg = MhcConfig(layers=2, hidden=32, heads=4, kv_heads=2, ffn=64, vocab=64, max_seq=16, n=4, sinkhorn_iters=3)
    return MhcTransformer(cfg), torch.randint(0, 64, (2, 16))


def _train(model, ids, setting, steps=2, impl="foreach", autocast=False):
    """Loss and gradients of the first step, parameters after `steps` AdamW steps."""
    m = copy.deepcopy(model)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2, foreach=impl == "foreach")
    if setting is not None:
        m, opt = mhc_torch.apply(m, opt, setting)
    first = None
    for _ in range(steps):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = m(ids, ids)
        loss.backward()
        if first is None:
            host = {id(p): h for p, h in getattr(opt, "offloaded_params", ())}
            grads = {n: (host[id(p)].grad if id(p) in host else p.grad).detach().clone()
                     for n, p in m.named_parameters()}
            first = (loss.detach().clone(), grads)
        opt.step()
        opt.zero_grad()
    return first[0], first[1], {n: p.detach().clone() for n, p in m.named_parameters()}


@pytest.fixture(scope="module")
def reference(mhc_model):
    return _train(*mhc_model, None)


@pytest.mark.parametrize("setting", [
    {"checkpoint": {"modules": LAYERS, "policy": "full"}},
    {"checkpoint": {"modules": LAYERS[:1], "policy": "save_matmuls"}},
    {"checkpoint": {"modules": ["MhcTransformer"], "policy": "mhc"}},
    {"checkpoint": [{"modules": LAYERS[:1], "policy": "full"}, {"modules": LAYERS[1:], "policy": "save_matmuls"}]},
    {"offload": {"mode": "sync", "min_bytes": 0}},
    {"offload": {"mode": "streamed", "modules": LAYERS[1:], "max_fwd_stash": 1, "prefetch": 3}},
    {"checkpoint": {"modules": LAYERS[:1]}, "offload": {"mode": "streamed"}},
    {"optimizer": {"impl": "forloop"}},
    {"optimizer": {"state": "host"}},
    {"optimizer": {"state": "host", "impl": "forloop"}, "allocator": "expandable_segments:True"},
], ids=lambda s: json.dumps(s, sort_keys=True))
def test_same_math_is_bitwise_equal(mhc_model, reference, setting):
    loss, grads, params = _train(*mhc_model, setting)
    ref_loss, ref_grads, ref_params = reference
    assert torch.equal(loss, ref_loss)
    for n in ref_grads:
        assert torch.equal(grads[n], ref_grads[n]), n
        assert torch.equal(params[n], ref_params[n]), n


def test_fused_optimizer_within_tolerance(mhc_model):
    """The fused AdamW kernel orders its arithmetic differently from the foreach one: the same
    loss and gradients, parameters within 1e-6 after one step of lr 1e-2 (a second step would
    compare updates from different gradients: Adam normalises them, so a gradient near zero
    that rounds the other way moves a parameter by up to lr)."""
    ref_loss, ref_grads, ref_params = _train(*mhc_model, None, steps=1)
    loss, grads, params = _train(*mhc_model, {"optimizer": {"impl": "fused"}}, steps=1)
    assert torch.equal(loss, ref_loss)
    assert all(torch.equal(grads[n], ref_grads[n]) for n in grads)
    worst = max((params[n] - ref_params[n]).abs().max().item() for n in params)
    assert 0 < worst <= 1e-6


def test_bf16_weights_within_tolerance(mhc_model):
    """bf16 weights (model.to(torch.bfloat16)) under bf16 autocast against fp32 weights under the
    same autocast: the matmuls see the same bf16 operands; the rest (residual stream, norms' inputs,
    gradients) is rounded to bf16's 8-bit mantissa. Stated tolerance: the loss within 1e-3
    relative, all gradients together within 2% (relative norm), each parameter's gradient in the
    same direction (cosine >= 0.99). Seen: 1.0e-4, 0.31%, 0.99992."""
    model, ids = mhc_model
    loss0, grads0, _ = _train(model, ids, None, steps=1, autocast=True)
    loss1, grads1, params1 = _train(model, ids, {"weights": "bf16"}, steps=1, autocast=True)
    assert all(p.dtype == torch.bfloat16 for p in params1.values())
    assert abs(loss1.float() - loss0.float()) / loss0.float() <= 1e-3
    flat0 = torch.cat([g.flatten() for g in grads0.values()])
    flat1 = torch.cat([grads1[n].float().flatten() for n in grads0])
    assert ((flat1 - flat0).norm() / flat0.norm()).item() <= 0.02
    for n, g in grads0.items():
        if g.norm() > 0:
            assert torch.nn.functional.cosine_similarity(grads1[n].float().flatten(), g.flatten(), dim=0) >= 0.99, n


def test_gpt2_blocks_with_dropout_bitwise(tmp_path):
    """A Hugging Face GPT-2 (keyword arguments into its blocks, dropout): checkpointing restores
    the random state for the recompute, so the dropout masks and the gradients are the same."""
    transformers = pytest.importorskip("transformers")
    cfg = transformers.GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=2, n_head=4)
    torch.manual_seed(1)
    model = transformers.GPT2LMHeadModel(cfg).train()
    ids = torch.randint(0, 64, (2, 16))

    def run(setting):
        m = copy.deepcopy(model)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
        if setting:
            m, opt = mhc_torch.apply(m, opt, setting)
        torch.manual_seed(2)
        loss = m(input_ids=ids, labels=ids).loss
        loss.backward()
        return loss.detach(), {n: p.grad.clone() for n, p in m.named_parameters()}

    model.config.use_cache = False   # as the setting's checkpoint turns it off: with the cache the attention
    ref_loss, ref_grads = run(None)  # reads keys and values through it, other sums bit for bit
    loss, grads = run({"checkpoint": {"modules": ["GPT2LMHeadModel.transformer.h.0"]},
                       "offload": {"mode": "streamed", "modules": ["GPT2LMHeadModel.transformer.h.1"]}})
    assert torch.equal(loss, ref_loss)
    assert all(torch.equal(grads[n], ref_grads[n]) for n in ref_grads)


@pytest.mark.parametrize("setting, message", [
    ({"checkpoint": {"modules": ["MhcTransformer.layers.7"]}},
     "setting: checkpoint.modules: MhcTransformer has no module 'MhcTransformer.layers.7' "
     "(did you mean 'MhcTransformer.layers.0' or 'MhcTransformer.layers.1'?)"),
    ({"offload": {"modules": ["blocks.0"]}},
     "setting: offload.modules: MhcTransformer has no module 'blocks.0' "
     "(names are the trace's, e.g. 'MhcTransformer.embed', or model.get_submodule's, 'embed')"),
    ({"offload": {"modules": ["layers.7"]}},
     "setting: offload.modules: MhcTransformer has no module 'layers.7' (did you mean 'layers.0' or 'layers.1'?)"),
    ({"checkpoint": {"modules": ["MhcTransformer.layers.0.attn"], "policy": "mhc"}},
     "setting: checkpoint.policy mhc: module 'MhcTransformer.layers.0.attn' holds no mHC hyper-connection maps"),
    ({"checkpoint": {"modules": []}}, "setting: checkpoint.modules: expected a non-empty array of module names"),
    ({"checkpoint": {"policy": "full"}}, "setting: checkpoint: 'modules' is missing (the modules to recompute)"),
    ({"checkpoint": [{"modules": LAYERS}, {"modules": LAYERS[1:], "policy": "mhc"}]},
     "setting: checkpoint[1].modules: 'MhcTransformer.layers.1' is in an earlier group too"),
    ({"checkpoint": [{"modules": LAYERS[:1]}, {"modules": ["MhcTransformer.layers.0.mlp"], "policy": "mhc"}]},
     "setting: checkpoint[1].policy mhc: module 'MhcTransformer.layers.0.mlp' holds no mHC hyper-connection maps"),
    ({"offload": {"mode": "async"}}, 'setting: offload.mode: "async" is not one of sync, streamed'),
    ({"offload": {"min_bytes": -1}}, "setting: offload.min_bytes: expected a whole number of bytes >= 0, got -1"),
    ({"offload": {"mode": "streamed", "max_fwd_stash": 0}},
     "setting: offload.max_fwd_stash: expected a whole number of saves >= 1, got 0"),
    ({"offload": {"prefetch": 2}}, "setting: offload.prefetch: only a streamed offload has one (mode is sync)"),
    ({"optimizer": {"impl": "fast"}}, 'setting: optimizer.impl: "fast" is not one of foreach, fused, forloop'),
    ({"weights": "fp8"}, 'setting: weights: "fp8" is not one of fp32, bf16'),
    ({"allocator": "expandable_segments:yes"}, "setting: allocator: expandable_segments:yes: expected True or False"),
    ({"allocator": "max_split:128"}, "setting: allocator: unknown option 'max_split'; valid: backend, "
     "expandable_segments, garbage_collection_threshold, graph_capture_record_stream_reuse, max_non_split_rounding_mb, "
     "max_split_size_mb, per_process_memory_fraction, pinned_num_register_threads, pinned_reserve_segment_size_mb, "
     "pinned_use_background_threads, pinned_use_cuda_host_register, release_lock_on_cudamalloc, "
     "roundup_power2_divisions"),
    ({"recompute": {}}, "setting: unknown key 'recompute'; valid: allocator, checkpoint, offload, optimizer, "
     "reshard_after_forward, weights"),
    ({"reshard_after_forward": {"MhcTransformer.layers.0": 1}},
     "setting: reshard_after_forward.MhcTransformer.layers.0: expected true, false or a number of ranks >= 2, got 1"),
    ({"reshard_after_forward": {"MhcTransformer.layers.0": False}},
     "setting: reshard_after_forward.MhcTransformer.layers.0: not a fully_shard (FSDP2) module"),
    ("[1, 2]", "setting: expected a JSON object, got an array"),
    ("{\"weights\": ", "setting: not JSON: Expecting value at line 1 column 13"),
])
def test_bad_settings_one_line(mhc_model, setting, message):
    model, _ = mhc_model
    m = copy.deepcopy(model)
    opt = torch.optim.AdamW(m.parameters())
    with pytest.raises(mhc_torch.SettingError) as e:
        mhc_torch.apply(m, opt, setting)
    assert str(e.value) == message
    assert m.forward.__func__ is MhcTransformer.forward  # nothing was changed


def test_settings_from_a_file_and_defaults(tmp_path):
    f = tmp_path / "s.json"
    f.write_text('{"checkpoint": {"modules": ["M.a"]}, "offload": {"mode": "streamed"}, "optimizer": {"impl": "fused"}}')
    assert mhc_torch.load_setting(str(f)) == {
        "checkpoint": [{"modules": ["M.a"], "policy": "full"}],
        "offload": {"mode": "streamed", "modules": None, "min_bytes": 1024, "max_fwd_stash": 5, "prefetch": 2},
        "optimizer": {"state": "device", "impl": "fused"}}
    with pytest.raises(mhc_torch.SettingError, match=r"^.*none\.json: No such file or directory$"):
        mhc_torch.load_setting(str(tmp_path / "none.json"))


def test_apply_twice_and_after_steps_refused(mhc_model):
    model, ids = mhc_model
    m = copy.deepcopy(model)
    opt = torch.optim.AdamW(m.parameters())
    m, opt = mhc_torch.apply(m, opt, {"checkpoint": {"modules": LAYERS}})
    with pytest.raises(mhc_torch.SettingError, match="called on this model already"):
        mhc_torch.apply(m, opt, {"checkpoint": {"modules": LAYERS}})
    m2 = copy.deepcopy(model)
    opt2 = torch.optim.AdamW(m2.parameters())
    m2(ids, ids).backward()
    opt2.step()
    with pytest.raises(mhc_torch.SettingError, match="apply the setting before the first step"):
        mhc_torch.apply(m2, opt2, {"optimizer": {"state": "host"}})


def _adagrad_steps(model, ids, setting, steps=2):
    m = copy.deepcopy(model)
    opt = torch.optim.Adagrad(m.parameters(), lr=1e-2, initial_accumulator_value=0.1)
    assert opt.state   # Adagrad makes its state ("step" 0, "sum") in its constructor
    if setting is not None:
        m, opt = mhc_torch.apply(m, opt, setting)
    for _ in range(steps):
        m(ids, ids).backward()
        opt.step()
        opt.zero_grad()
    return [p.detach().clone() for p in m.parameters()]


def test_host_state_takes_adagrad_before_its_first_step(mhc_model):
    """Adagrad's constructor-made state is no step taken: the host setting is applied, and the host
    copies' Adagrad (its own constructor's "sum" from initial_accumulator_value) steps as the plain
    one. After a step, and with weights bf16 (which would leave "sum" in float32), it is refused."""
    model, ids = mhc_model
    plain = _adagrad_steps(model, ids, None)
    host = _adagrad_steps(model, ids, {"optimizer": {"state": "host"}})
    for a, b in zip(plain, host):
        assert torch.equal(a, b)
    m = copy.deepcopy(model)
    opt = torch.optim.Adagrad(m.parameters())
    m(ids, ids).backward()
    opt.step()
    with pytest.raises(mhc_torch.SettingError, match="apply the setting before the first step"):
        mhc_torch.apply(m, opt, {"optimizer": {"state": "host"}})
    m = copy.deepcopy(model)
    with pytest.raises(mhc_torch.SettingError, match="made by its constructor.*old dtype"):
        mhc_torch.apply(m, torch.optim.Adagrad(m.parameters()), {"weights": "bf16"})


@pytest.mark.parametrize("modules", [None, ["Sequential.0"]])
def test_offload_hooks_leave_autograd_after_a_failed_forward(modules):
    """apply's offload enters its saved-tensor hooks by forward hooks (the printed code's): a forward
    that raises left them on autograd's stack (every later save of the thread offloaded, outside
    any chosen module); the exit hook runs also then (always_call)."""
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
    mhc_torch.apply(model, None, {"offload": {"mode": "sync", "modules": modules, "min_bytes": 0}})
    top = torch._C._autograd._top_saved_tensors_default_hooks
    with pytest.raises(RuntimeError):
        model(torch.randn(4, 7))   # wrong width: Linear raises
    assert top(False) is None
    model(torch.randn(4, 8)).sum().backward()   # and the model still trains
    assert top(False) is None


def test_module_names_as_get_submodule_spells_them(mhc_model):
    """`mhc advise --setting` takes a module named as model.get_submodule spells it (no root class
    name: 'layers.0') as well as the trace's 'MhcTransformer.layers.0'; --verify passes the setting on
    as given, and apply refused it ("has no module 'backbone.layer1.0'", DeepLabV3): the prediction
    printed, the verification stopped."""
    model, ids = mhc_model
    short, full = copy.deepcopy(model), copy.deepcopy(model)
    s_opt, f_opt = torch.optim.AdamW(short.parameters()), torch.optim.AdamW(full.parameters())
    mhc_torch.apply(short, s_opt, {"checkpoint": {"modules": [n.split(".", 1)[1] for n in LAYERS]},
                                   "offload": {"modules": [LAYERS[0].split(".", 1)[1]]}})
    mhc_torch.apply(full, f_opt, {"checkpoint": {"modules": LAYERS}, "offload": {"modules": LAYERS[:1]}})
    for a, b in zip(short.layers, full.layers):
        assert "forward" in a.__dict__ and "forward" in b.__dict__   # checkpointed: a forward of its own
    with pytest.raises(mhc_torch.SettingError, match="has no module 'layerz.0'"):
        mhc_torch.apply(copy.deepcopy(model), None, {"checkpoint": {"modules": ["layerz.0"]}})
