"""Settings that mhc advise predicts and the capture measures alike: gradient accumulation, a grad
scaler's step, frozen weights, modules made inside the forward, host optimizers, and the offload
code advise prints."""
import json
import subprocess

import pytest

torch = pytest.importorskip("torch")

import mhc_torch  # noqa: E402
from mhc_torch import store  # noqa: E402
from settings_net import (  # noqa: E402
    _advise_json, _copies, LOSS_INSIDE_FILE, NET_FILE, _predicted_and_captured, _rows,
)
from tiny_models import Net  # noqa: E402

ACCUM_FILE = NET_FILE.replace("torch.randn(32, 16)", "torch.randn(16384, 16)") + '''

def step(model, batch, run):
    """Gradient accumulation written by hand: two micro-batches, the first under no_sync where
    the model has it (DDP), one optimizer step."""
    import contextlib

    for i in range(2):
        sync = getattr(model, "no_sync", None)
        with sync() if sync is not None and i == 0 else contextlib.nullcontext():
            run.backward(model(*batch) / 2)
    run.optimizer.step()
    run.zero_grad(set_to_none=True)
'''


@pytest.mark.parametrize("how", ["micro-batches", "step function"])
def test_gradient_accumulation_settings_predicted_as_captured(tmp_path, mhc_exe, how):
    """A step of several forward and backward passes (micro-batches: the recipe's, or a step
    function's own loop) with the gradients kept between them: checkpointing and offloading were
    refused ('gradient accumulation ... not modelled') and never searched; the host optimizer kept
    the device gradients from the first pass to the last. Each pass now gets its own
    recomputation, copies and gradient copies to the host; the predicted peak equals the capture
    with the setting applied, and the search answers with them."""
    source = ACCUM_FILE if how == "step function" else ACCUM_FILE.split("\n\ndef step(")[0]
    recipe = {} if how == "step function" else {"micro_batches": 3}
    for setting in ({"checkpoint": {"modules": ["Net.blocks.1"]}},
                    {"offload": {"mode": "streamed", "modules": None, "min_bytes": 1024}},
                    {"checkpoint": {"modules": ["Net.blocks.2"]},
                     "offload": {"mode": "sync", "modules": ["Net.blocks.0"], "min_bytes": 1024}},
                    {"optimizer": {"state": "host"}}):
        doc, captured = _predicted_and_captured(tmp_path, mhc_exe, source, setting, **recipe)
        assert doc["passes_per_step"] == (3 if recipe else 2)
        row = doc["rows"][0]
        assert row["peak_bytes"] < doc["baseline"]["peak_bytes"] or "optimizer" in setting, setting
        assert row["peak_bytes"] == captured.peak_bytes, setting
        assert row["host_peak_bytes"] == int(captured.meta["capture.host_peak_bytes"]), setting
    out = subprocess.run([mhc_exe, "advise", str(tmp_path / "base.db"), "--capacity", "89MiB", "--json"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert any("checkpoint" in r["setting"] for r in json.loads(out.stdout)["rows"])


SCALER_FILE = NET_FILE.replace("nn.Linear(16, 64, bias=False), nn.Linear(64, 16, bias=False)",
                               "nn.Linear(1024, 1024, bias=False), nn.Linear(1024, 1024, bias=False)").replace(
    "torch.randn(32, 16)", "torch.randn(256, 1024)") + '''

def step(model, batch, run):
    """fp16 autocast with torch.amp.GradScaler, as a GPU user writes it."""
    scaler = run.state.setdefault("scaler", torch.amp.GradScaler("cuda"))
    with run.autocast():
        loss = model(*batch).float()
    scaler.scale(loss).backward()
    scaler.step(run.optimizer)
    scaler.update()
    run.zero_grad(set_to_none=True)
'''


def test_grad_scaler_step_checkpoint_predicted_as_captured(tmp_path, mhc_exe):
    """GradScaler unscales and checks the gradients after the backward, ops the capture records
    in the forward's phase: the forward's end was taken after the backward, so checkpointing kept
    autocast's fp16 weight copies through the whole backward (10 MiB more here: 204.5 against 194.0 MB): the
    predicted peak was 2.89% above the capture on the decoder of bench/advise/new_user. The step's
    forward ends where its backward starts (the pass), and the prediction equals the capture."""
    setting = {"checkpoint": {"modules": ["Net.blocks.0", "Net.blocks.1", "Net.blocks.2"]}}
    doc, captured = _predicted_and_captured(tmp_path, mhc_exe, SCALER_FILE, setting, autocast_dtype=torch.float16)
    assert doc["rows"][0]["peak_bytes"] == captured.peak_bytes


FROZEN_FILE = SCALER_FILE.split("\n\ndef step(")[0].replace('''def build_model():
    return Net()''', '''def build_model():
    net = Net()
    for b in net.blocks:
        b.fc1.weight.requires_grad_(False)  # a frozen base weight, as LoRA's
    return net''').replace("return x.sum()", "return x.repeat(1, 64).float().sum()")  # the peak: the forward's end


def test_frozen_weights_casts_under_checkpoint_predicted_as_captured(tmp_path, mhc_exe):
    """Autocast caches the bf16 cast of a weight that requires grad until the forward ends; a
    frozen weight's (LoRA's base weights) is cast anew at each use and dies after it. The
    prediction kept the frozen weights' casts in checkpointed blocks to the forward's end: 0.67%
    above the capture on bench/advise/new_user/lora_llama.py (8.37 against 8.31 GiB); 2 MiB here."""
    setting = {"checkpoint": {"modules": ["Net.blocks.0", "Net.blocks.1"]}}
    doc, captured = _predicted_and_captured(tmp_path, mhc_exe, FROZEN_FILE, setting, autocast_dtype=torch.bfloat16)
    assert doc["rows"][0]["peak_bytes"] == captured.peak_bytes


def test_recompute_stops_where_pytorch_stops(tmp_path, mhc_exe):
    """PyTorch's early stop ends a checkpoint's recomputation at the region's last pack, and an
    op packs its inputs before its kernel runs: the last block's fc2 (saving its input) does not
    rerun, so under selective checkpointing its cached output is never taken back and lives until
    the checkpoint's frame dies. The prediction reran fc2 and freed the cached output there: 1 MiB
    (1.14%) below the capture here, and every checkpointed block's last matmul counted twice in
    the time."""
    setting = {"checkpoint": {"modules": ["Net.blocks.0", "Net.blocks.1", "Net.blocks.2"], "policy": "save_matmuls"}}
    doc, captured = _predicted_and_captured(tmp_path, mhc_exe, ACCUM_FILE.split("\n\ndef step(")[0], setting)
    assert doc["rows"][0]["peak_bytes"] == captured.peak_bytes


def _reserved(mhc_exe, path, allocator):
    return _advise_json(mhc_exe, path, {"allocator": allocator})["rows"][0]["reserved_bytes"]


def test_module_made_inside_the_forward_is_its_callers(tmp_path, mhc_exe):
    """A module the model does not register, made and called inside its forward (T5's and BART's
    CrossEntropyLoss), runs inside the model's call: a saved_tensors_hooks or a checkpoint around
    the model covers its ops. ModTracker names it by its class alone, as a model of its own, so
    the capture recorded its ops outside the model and `mhc advise` kept its saves (log_softmax's
    output, 512 x 1024 x 4 = 2 MiB) on the device under an offload of the whole forward, where
    the capture offloads them: T5 (bench/advise/new_user/t5.py) streamed with expandable segments
    was predicted 1,535,115,264 B reserved against 1,430,257,664 captured, 197 MB short on the host.
    It is recorded as its caller's child, and the prediction equals the capture."""
    setting = {"offload": {"mode": "streamed", "modules": None, "min_bytes": 1024},
               "allocator": "expandable_segments:True"}
    doc, captured = _predicted_and_captured(tmp_path, mhc_exe, LOSS_INSIDE_FILE, setting,
                                            loss_fn=lambda m, b: m(*b))
    modules = dict(_rows(tmp_path / "base.db", "SELECT n.text, coalesce(pn.text, '') FROM modules m JOIN strings n "
                                                "ON n.id = m.name LEFT JOIN modules p ON p.id = m.parent "
                                                "LEFT JOIN strings pn ON pn.id = p.name"))
    assert modules["Net.CrossEntropyLoss"] == "Net"
    assert "CrossEntropyLoss" not in modules
    row = doc["rows"][0]
    assert row["peak_bytes"] == captured.peak_bytes
    assert row["host_peak_bytes"] == int(captured.meta["capture.host_peak_bytes"])
    assert row["reserved_bytes"] == _reserved(mhc_exe, tmp_path / "set.db", setting["allocator"])


def test_streamed_prefetch_from_any_save_of_a_storage(tmp_path, mhc_exe):
    """The streamed backward's unpack of save i copies back the storages of saves i-1 .. i-2,
    whichever save of a storage they are: ReLU's output is saved by the ReLU and again by the
    matmul after it, so the head's unpack of its input brings the last block's ReLU output back
    (its second save is two before). The prediction looked back from a storage's first save
    only and brought it back one node later: the predicted peak was 512 KiB (the ReLU output,
    512 x 256 x 4 B) under the capture's, 71,445,000 against 71,969,288 B here."""
    source = LOSS_INSIDE_FILE.replace("loss_fct = nn.CrossEntropyLoss()   # made here, as T5's and BART's forward "
                                      "do: not a child\n        return loss_fct(logits, labels)",
                                      "return nn.functional.cross_entropy(logits, labels)")
    assert source != LOSS_INSIDE_FILE
    setting = {"offload": {"mode": "streamed", "modules": None, "min_bytes": 1024}}
    doc, captured = _predicted_and_captured(tmp_path, mhc_exe, source, setting, loss_fn=lambda m, b: m(*b))
    assert doc["rows"][0]["peak_bytes"] == captured.peak_bytes


@pytest.mark.parametrize("weights", [None, torch.bfloat16])
def test_host_optimizer_host_bytes_predicted_as_captured(tmp_path, mhc_exe, weights):
    """The optimizer on the host (mhc_torch.apply: fp32 master copies, their gradient buffers,
    state and the step's temporaries, all on the host), with gradient accumulation (3
    micro-batches, one step): the predicted host peak left out the host step's temporaries
    (foreach AdamW's square roots of all the second moments, one parameter's worth: 24,576 B
    here), made the first step's state after the step instead of in it, and sized 16-bit
    parameters' copies at 16 bits: 98,328 B (bf16: 49,176) predicted against 122,904 captured
    (masters, gradient buffers, 2 moments and the temporaries, 5 x 24,576 B, and 6 fp32 step
    counters). Since 2026-12-07 the host copies step with AdamW's for-loop, not the captured
    foreach=True: one weight's sqrt and quotient beside the previous quotient, 3 x 4,096 B where
    the foreach step held all six square roots (24,576 B): 110,616 B."""
    source = ACCUM_FILE.split("\n\ndef step(")[0]
    recipe = {"micro_batches": 3}
    if weights is not None:
        recipe.update(param_dtype=weights, autocast_dtype=weights)
    doc, captured = _predicted_and_captured(tmp_path, mhc_exe, source, {"optimizer": {"state": "host"}}, **recipe)
    row = doc["rows"][0]
    assert row["peak_bytes"] == captured.peak_bytes
    assert row["host_peak_bytes"] == int(captured.meta["capture.host_peak_bytes"]) == 4 * 6 * 1024 * 4 + 6 * 4 + 3 * 4096


def _ce_loss(m, b):
    """A loss computed after the model's forward (log_softmax saves its 2,048 B output)."""
    return torch.nn.functional.cross_entropy(m(*b), torch.zeros(32, dtype=torch.long))


@pytest.mark.parametrize("offload", [{"mode": "sync"}, {"mode": "streamed", "prefetch": 2},
                                     {"mode": "sync", "modules": ["Net.blocks.1", "Net.blocks.2"]}])
def test_printed_offload_code_is_what_verify_captures(tmp_path, mhc_exe, offload):
    """The offload code `mhc advise` prints, run as printed, and mhc_torch.apply (what --verify
    captures) enter the same hooks at the same places, and the prediction holds for both: the same
    peak, copies and host peak. The whole forward's printed code was `with offload: loss =
    model(**batch).loss` (forward and loss inside, and a Hugging Face loss only) where apply and
    the prediction offload the model's forward alone; now both are the model's forward hooks."""
    batch = lambda: (torch.randn(32, 16),)   # noqa: E731
    base = str(tmp_path / "base.db")
    mhc_torch.capture(Net, batch, steps=1, path=base, autocast_dtype=None, loss_fn=_ce_loss)
    setting = {"offload": offload}
    row = _advise_json(mhc_exe, base, setting)["rows"][0]
    printed = row["code"].split("# or, the same in one line")[0]
    assert "torchtune" not in printed   # torchtune's class copies per tensor: not what was predicted

    def build_pasted():
        model = Net()
        exec(printed, {"model": model, "torch": torch})
        return model
    pasted = mhc_torch.capture(build_pasted, batch, steps=1, path=str(tmp_path / "pasted.db"), autocast_dtype=None,
                               loss_fn=_ce_loss)
    applied = mhc_torch.capture(Net, batch, steps=1, path=str(tmp_path / "applied.db"), autocast_dtype=None,
                                loss_fn=_ce_loss, setting=setting)
    assert pasted.peak_bytes == applied.peak_bytes == row["peak_bytes"]
    moved = _copies(str(tmp_path / "pasted.db"))
    assert moved == _copies(str(tmp_path / "applied.db")) and moved
    host = [store.read_meta(str(tmp_path / f"{n}.db"))["capture.host_peak_bytes"] for n in ("pasted", "applied")]
    assert host[0] == host[1] == str(row["host_peak_bytes"])


@pytest.mark.parametrize("optimizer, micro_batches, host_peak", [
    # AdamW left to pick (foreach=None): on the host's CPU copies PyTorch runs the for-loop. Masters,
    # gradient buffers, exp_avg, exp_avg_sq: 4 x 24,576 B (6 weights of 1,024 fp32), 6 step counters
    # (24 B), and the for-loop's temporaries at their most: a weight's sqrt and quotient while the
    # previous weight's quotient is held, 3 x 4,096 = 12,288 B. The capture stepped the host copies
    # with foreach (its fake CPU tensors count as a GPU's), 24,576 B of square roots: 122,904 B.
    ("adamw", 1, 4 * 24576 + 24 + 3 * 4096),
    # The user's foreach=True (a GPU's choice) is not kept on the host copies: the for-loop's figure,
    # where the host step held foreach's square roots of all six weights (122,904 B) until 2026-12-07
    ("adamw-foreach", 1, 4 * 24576 + 24 + 3 * 4096),
    # SGD with momentum, 3 micro-batches, 2 steps: masters, gradient buffers and momentum
    # (3 x 24,576 B), and in the second step's later passes the host copy of a pass's gradient
    # added to its buffer, one weight's 4,096 B at a time: the prediction left it out (73,728 B).
    ("sgd", 3, 3 * 24576 + 4096),
    # SGD's for-loop with weight decay: one weight's decayed gradient (4,096 B) at a time, where the
    # capture's foreach step held all six (the prediction was 24,576 B over); with nesterov the
    # decayed gradient is held while grad + momentum x buf is made: two weights' worth
    ("sgd-decay", 1, 3 * 24576 + 4096),
    ("sgd-decay-foreach", 1, 3 * 24576 + 4096),
    ("sgd-nesterov-decay", 1, 3 * 24576 + 2 * 4096),
    # The other for-loops, read from torch/optim's _single_tensor_* (masters, gradient buffers,
    # state, step counters, then the loop's tensors at their most; 2026-12-07): Adam's coupled
    # decay holds grad + wd x param beside the sqrt, the quotient and the previous denom (4
    # weights' worth; 3 predicted before, 4,096 B under the capture)
    ("adam-decay", 1, 4 * 24576 + 24 + 4 * 4096),
    # amsgrad's third state, and maximize's -grad held from one weight to the next
    ("adamw-maximize-amsgrad", 1, 5 * 24576 + 24 + 4 * 4096),
    ("nadam", 1, 4 * 24576 + 48 + 3 * 4096),   # a step counter and mu_product per weight
    ("radam-decay", 1, 4 * 24576 + 24 + 3 * 4096),   # bias_corrected_exp_avg held to the next weight
    ("adamax", 1, 4 * 24576 + 24 + 4096),
    ("rmsprop-centered", 1, 5 * 24576 + 24 + 3 * 4096),
    ("adadelta", 1, 4 * 24576 + 24 + 3 * 4096),
    # Adagrad: masters, gradient buffers, "sum" (3 x 24,576 B) and step counters; the previous
    # weight's std held while this one's is made (with decay beside grad + wd x param). Before,
    # the recorded foreach step's temporaries (a sqrt of every sum) were taken: 2 weights' worth
    # over here; and the host optimizer's constructor-made state was captured as device memory
    # (the device peak 24,600 B over the prediction, which was right)
    ("adagrad", 1, 3 * 24576 + 24 + 2 * 4096),
    ("adagrad-decay", 1, 3 * 24576 + 24 + 3 * 4096),
    # Rprop: "prev" and "step_size" (2 x 24,576 B); the product and sign beside the previous sign,
    # later the clone, grad.sign() and a bool mask (1,024 B, freed before): 3 weights' worth, 4 with
    # maximize's -grad (the foreach step's were taken before, every weight's at once)
    ("rprop", 1, 4 * 24576 + 24 + 3 * 4096),
    ("rprop-maximize", 1, 4 * 24576 + 24 + 4 * 4096),
    # ASGD: masters, gradient buffers, ax (3 x 24,576 B), step, eta and mu (18 x 4 B); t0 = -1:
    # the first step leaves mu = 0.5, so the second averages (param.sub(ax)) beside the decayed
    # gradient, with the last weight's new_eta and new_mu (torch.as_tensor of a number, 4 B each).
    # Its step reads step and mu into Python (`mu.item() != 1`), which fake tensors did not hold:
    # the capture stopped, of the device step as of the host's, before 2026-12-07, and the
    # prediction took the recorded foreach step's temporaries (98,376 B at t0's default)
    ("asgd-decay-t0", 1, 3 * 24576 + 72 + 2 * 4096 + 8),
])
def test_host_optimizer_as_pytorch_runs_it_on_the_cpu(tmp_path, mhc_exe, optimizer, micro_batches, host_peak):
    """The optimizer on the host steps with the implementation PyTorch picks for CPU tensors, and
    gradient accumulation's host copies are in the prediction: predicted = captured = worked out."""
    make = {"adamw": lambda ps: torch.optim.AdamW(ps, lr=1e-4),
            "sgd": lambda ps: torch.optim.SGD(ps, lr=1e-2, momentum=0.9),
            "sgd-decay": lambda ps: torch.optim.SGD(ps, lr=1e-2, momentum=0.9, weight_decay=1e-4),
            "sgd-decay-foreach": lambda ps: torch.optim.SGD(ps, lr=1e-2, momentum=0.9, weight_decay=1e-4,
                                                            foreach=True),
            "adamw-foreach": lambda ps: torch.optim.AdamW(ps, lr=1e-4, foreach=True),
            "sgd-nesterov-decay": lambda ps: torch.optim.SGD(ps, lr=1e-2, momentum=0.9, weight_decay=1e-4,
                                                             nesterov=True),
            "adam-decay": lambda ps: torch.optim.Adam(ps, lr=1e-3, weight_decay=0.1),
            "adamw-maximize-amsgrad": lambda ps: torch.optim.AdamW(ps, lr=1e-3, maximize=True, amsgrad=True),
            "nadam": lambda ps: torch.optim.NAdam(ps, lr=1e-3),
            "radam-decay": lambda ps: torch.optim.RAdam(ps, lr=1e-3, weight_decay=0.1),
            "adamax": lambda ps: torch.optim.Adamax(ps, lr=1e-3),
            "rmsprop-centered": lambda ps: torch.optim.RMSprop(ps, lr=1e-3, centered=True, momentum=0.9,
                                                               weight_decay=0.1),
            "adadelta": lambda ps: torch.optim.Adadelta(ps),
            "adagrad": lambda ps: torch.optim.Adagrad(ps, lr=1e-2),
            "adagrad-decay": lambda ps: torch.optim.Adagrad(ps, lr=1e-2, weight_decay=0.01),
            "rprop": lambda ps: torch.optim.Rprop(ps, lr=1e-3),
            "rprop-maximize": lambda ps: torch.optim.Rprop(ps, lr=1e-3, maximize=True),
            "asgd-decay-t0": lambda ps: torch.optim.ASGD(ps, lr=1e-2, weight_decay=0.1, t0=-1)}[optimizer]
    source = ACCUM_FILE.split("\n\ndef step(")[0]
    doc, captured = _predicted_and_captured(tmp_path, mhc_exe, source, {"optimizer": {"state": "host"}},
                                            micro_batches=micro_batches, steps=2, optimizer=make)
    row = doc["rows"][0]
    assert row["peak_bytes"] == captured.peak_bytes
    assert row["host_peak_bytes"] == int(captured.meta["capture.host_peak_bytes"]) == host_peak
