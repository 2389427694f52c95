"""Captures training steps of a PyTorch model on fake tensors as an mhc-toolkit trace.

The model runs under FakeTensorMode (shapes, dtypes and storages, no memory and no GPU), which hands
the capture every aten op the model runs, after autograd and autocast:
- an op is a kernel on stream 0 unless it only makes a view or an uninitialised tensor;
- every storage is an allocation, from the op that made it until its last reference dies (a weak
  reference's callback on the untyped storage, the way MemTracker tracks storages under fake tensors);
- accesses come from the op schema's alias information: inputs are read, mutated arguments are
  read-write, new outputs are written;
- durations come from a roofline of the target GPU (gpus.py) and torch.utils.flop_counter.

This file runs the steps; the parts it runs them with: fake_mode.py (the mode that hands ops over),
recording.py (the trace being built), op_schema.py (what an op reads and writes), flops.py,
capture_contexts.py (torch as on a GPU for the capture's duration), step_facts.py (meta about the
model, optimizer and step), fake_errors.py and compiled_refused.py (one-line refusals),
allocator_environment.py.
"""
from __future__ import annotations

import contextlib
import gc
import logging
import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch.utils._pytree import tree_flatten, tree_map

from . import ctc_loss, cudnn_rnn, generation, gpu_paths, model_cache, output_file, recipes, store, torchvision_ops
from .allocator_environment import ALLOCATOR_ENV, _readable_allocator_conf, allocator_env
from .autocast_cuda import user_cuda_autocast
from .batch_values import keep_batch_values
from .built_for_gpu import BuiltForGpu, CudaInStep, cuda_calls_in_step, cuda_calls_on_fake_device
from .capture_contexts import (_collector_at_step_ends, _environment_kept, _fake_constants_deep_copied,
                               _functorch_beside_capture,
                               _grad_scaler_on_fake_tensors, _leaf_safe_mod_tracker, _module_conversion_in_place,
                               _older_objects_frozen, _save_on_cpu_as_offload, _together, _user_saved_hooks_recorded,
                               _trunc_normal_without_values, _value_checks_passed,
                               _sac_policies_see_gpu_attention)
from .compiled_refused import _compiled_functions_refused, _refuse_compiled
from .errors import CaptureError, ForkedChild, a_kind
from .fake_errors import _fake_error
from .fake_mode import _RecordingFakeMode
from .gpus import GpuSpec, gpu as gpu_by_name
from .kernel_times import KernelTimes
from .recipes import Recipe, StepRun, cast_model
from .recording import Recording
from .step_facts import (_accumulation, _autocast_used, _lr_schedulers_recorded, _own_optimizers,
                         graph_freeing_backwards_counted, lr_scheduler_meta, model_facts, versions)


@dataclass
class CaptureResult:
    path: str
    kernels: int
    allocations: int
    steps: int
    peak_bytes: int
    step_time_ns: list[int] = field(default_factory=list)
    meta: dict[str, str] = field(default_factory=dict)
    flops_per_step: list[dict[str, int]] = field(default_factory=list)  # per step: phase -> FLOPs (kernel_info)


def _layer_lists(model: torch.nn.Module) -> dict[str, int]:
    """Fully qualified names (as ModTracker spells them) of the blocks of the model's largest
    ModuleList (its transformer layers), mapped to their index."""
    best, best_params = None, 0
    for path, m in model.named_modules():
        if isinstance(m, torch.nn.ModuleList) and len(m) > 0:
            n = sum(p.numel() for p in m.parameters())
            if n > best_params:
                best, best_params = path, n
    if best is None:
        return {}
    root = type(model).__name__
    return {f"{root}.{best}.{i}": i for i in range(len(model.get_submodule(best)))}


def _current_layer(parents: set[str], layers: dict[str, int], in_backward: bool) -> int | None:
    """The block a kernel runs in. Several blocks can be open at once (a skip connection's
    backward reaches an earlier block before ModTracker sees a later one's backward end), and
    `parents` is a set whose order follows string hashing (PYTHONHASHSEED), so the first found
    made captures differ from run to run. The block entered last is taken: the highest index in
    the forward, the lowest in the backward, which runs the blocks in reverse."""
    open_blocks = [layers[p] for p in parents if p in layers]
    if not open_blocks:
        return None
    return min(open_blocks) if in_backward else max(open_blocks)


def capture(build_model: Callable[[], torch.nn.Module],
            make_batch: Callable[[], Any],
            steps: int = 1,
            gpu: str | GpuSpec = "h100-sxm",
            path: str = "trace.db",
            loss_fn: Callable[[torch.nn.Module, Any], torch.Tensor] | None = None,
            optimizer: Callable[[list], torch.optim.Optimizer] | None = None,
            autocast_dtype: torch.dtype | None = torch.bfloat16,
            device: str = "cpu",
            meta: dict[str, str] | None = None,
            replace: bool = True,
            autocast_policy: str = "cuda",
            param_dtype: torch.dtype | None = None,
            forward_only: bool = False,
            micro_batches: int = 1,
            zero_grad: str = "none",
            step: Callable | None = None,
            setting=None,
            build_optimizer: Callable[[torch.nn.Module], torch.optim.Optimizer] | None = None,
            kernel_times: str | KernelTimes | None = None) -> CaptureResult:
    """Runs `steps` training steps (forward, backward, optimizer step, zero_grad) of the model
    that `build_model()` returns, on fake tensors, and writes the trace to `path`.

    `make_batch()` returns the inputs (called under fake tensors, so tensors cost nothing);
    `loss_fn(model, batch)` returns the scalar loss (default: `model(**batch).loss` for a dict,
    `model(*batch).loss` or the output itself for a tuple); `optimizer(params)` builds the
    optimizer (default AdamW, foreach); or `build_optimizer(model)` builds it from the model as
    built (parameter groups of one's own: a model file's build_optimizer()). Raises CaptureError
    when an op cannot run on fake tensors.

    The recipe (recipes.py, docs/torch.md): `autocast_dtype` with CUDA autocast's cast lists
    (`autocast_policy="cuda"`, emulated on the fake CPU tensors; "cpu" keeps torch's CPU lists);
    `param_dtype` casts the built model (bf16 weights); `forward_only` runs the forward under
    no_grad; `micro_batches` forward+backward passes accumulate gradients before one optimizer
    step; `zero_grad` "none" | "zeros" | "never" after it; or `step(model, batch, run)`, a step
    function of one's own (recipes.StepRun).
    `setting` (a dict, JSON text or file: mhc_torch.settings) is applied to the model and
    optimizer with mhc_torch.apply once both are built, before the first step, and recorded in
    meta `capture.setting` (SettingError when it does not fit the model).
    `kernel_times` (a PyTorch profiler trace of the same step on the GPU, or a KernelTimes) gives
    each kernel the time measured there where the profile has its op (kernel_times.py), the
    roofline otherwise (KernelTimesError, one line, for a profile without kernels or shapes).
    An output that cannot be written (a missing folder; an existing file when `replace` is False)
    is refused before the capture runs (store.OutputError, one line naming the file).
    """
    # Every argument checked, and the output found writable, before anything runs.
    spec = gpu if isinstance(gpu, GpuSpec) else gpu_by_name(gpu)
    _check_arguments(steps, optimizer, build_optimizer)
    recipe = Recipe(autocast_dtype, autocast_policy, param_dtype, forward_only, micro_batches, zero_grad, step)
    recipe.check()
    setting_given, setting = _setting_read(setting)
    output_file.check_output(path, replace)
    began_in = os.getpid()
    if isinstance(kernel_times, str):
        kernel_times = KernelTimes(kernel_times)
    rec = Recording(spec, kernel_times)
    fake = _RecordingFakeMode(allow_non_fake_inputs=False)
    layer_names, step_times, modules, facts = _run_as_on_gpu(
        rec, fake, build_model, make_batch, steps, loss_fn, optimizer, recipe, device, setting, build_optimizer)
    if os.getpid() != began_in:  # a child the model's code forked: the parent writes the trace
        raise ForkedChild(f"process {os.getpid()}, forked by the model in the capture of process {began_in}, writes "
                          "no trace")
    rec.layer_markers()
    rec.finish_categories()
    rec.peak_bytes = _device_peak(rec.allocs)  # after the folds above moved lifetimes
    full_meta = _trace_meta(spec, steps, layer_names, rec, recipe, device, kernel_times, setting_given, setting,
                            facts, meta)
    try:
        store.write_trace(path, rec.allocs, rec.kernels, rec.markers, full_meta, modules=modules,
                          saved=rec.saved_pairs(), copies=rec.copies, replace=replace)
    except store.RowOutOfRange as e:
        raise CaptureError(f"{e}; no trace written") from None
    return CaptureResult(path=path, kernels=len(rec.kernels), allocations=len(rec.allocs), steps=steps,
                         peak_bytes=rec.peak_bytes, step_time_ns=step_times, meta=full_meta,
                         flops_per_step=_flops_per_step(rec.kernels, steps))


def _check_arguments(steps, optimizer, build_optimizer) -> None:
    if steps < 1:
        raise ValueError("steps must be at least 1")
    if optimizer is not None and build_optimizer is not None:
        raise ValueError("pass optimizer(params) or build_optimizer(model), not both")


def _setting_read(setting):
    """(the setting as given, the setting checked), both None without one: meta records it as given."""
    if setting is None:
        return None, None
    from .settings import check_setting, read_setting

    setting_given = read_setting(setting)
    return setting_given, check_setting(setting_given)


def _run_as_on_gpu(rec, fake, build_model, make_batch, steps, loss_fn, optimizer, recipe, device, setting,
                   build_optimizer):
    """_run inside the contexts that make torch behave as on the GPU for the capture's duration,
    with what fails on fake tensors said in one line (CaptureError)."""
    # FakeTensorMode logs a traceback of its own before raising; the error raised says it all.
    fake_log = logging.getLogger("torch._subclasses.fake_tensor")
    fake_log_level = fake_log.level
    fake_log.setLevel(logging.CRITICAL)
    try:
        with _older_objects_frozen(), _module_conversion_in_place(), _trunc_normal_without_values(), \
                _fake_constants_deep_copied(), \
                _value_checks_passed(), _lr_schedulers_recorded(), _environment_kept(ALLOCATOR_ENV), \
                _sac_policies_see_gpu_attention():
            with _grad_scaler_on_fake_tensors(device), _compiled_functions_refused():
                return _run(rec, fake, build_model, make_batch, steps, loss_fn, optimizer, recipe, device, setting,
                            build_optimizer)
    except CaptureError:
        raise
    except Exception as e:
        err = _fake_error(e)
        if err is None:
            cause = e.__cause__ or e.__context__
            err = _fake_error(cause, e) if cause is not None else None
        if err is not None:
            raise err from None
        raise
    finally:
        fake_log.setLevel(fake_log_level)


def _trace_meta(spec, steps, layer_names, rec, recipe, device, kernel_times, setting_given, setting, facts, meta):
    """The trace's meta, in the order written: the target GPU and the capture, then the recipe and
    setting, the step's facts, what the recording saw, the versions, and last the caller's `meta`
    (which overrides all but the step's own optimizers)."""
    full_meta = {
        "source": "captured",
        "generator": f"mhc-torch 0.1 (torch {torch.__version__})",
        "accesses": "exact",
        "timing": "estimated",
        "timing_model": "roofline: max(flops / peak, bytes / hbm_bw) + launch overhead",
        "device_name": spec.device_name,
        "device_memory": str(spec.memory_bytes),
        "capture.gpu": spec.name,
        "capture.gpu.bf16_flops": repr(spec.bf16_flops),
        "capture.gpu.hbm_bw": repr(spec.hbm_bw),
        "capture.launch_overhead_ns": str(int(spec.launch_overhead_s * 1e9)),
        "capture.steps": str(steps),
        "capture.layers": str(len(layer_names)),
        "capture.peak_bytes": str(rec.peak_bytes),
        "capture.host_peak_bytes": str(rec.host_peak),
    }
    full_meta.update(recipe.meta())
    if torch.device(device).type == "cpu":   # where every autocast region goes through the capture's
        full_meta.update(_autocast_used(recipe, rec.forward_autocast))
    if kernel_times is not None:
        full_meta.update(kernel_times.meta())
    if setting is not None:
        from .settings import dumps

        full_meta["capture.setting"] = dumps(setting_given)
        if setting.get("weights") == "bf16" and recipe.param_dtype is None:
            full_meta["capture.param_dtype"] = "bfloat16"  # the setting's weights, cast by apply
    full_meta.update(facts)
    if getattr(rec, "user_save_on_cpu", False):
        full_meta["capture.save_on_cpu"] = "true"
    full_meta.update(rec.torch_func_meta())
    full_meta.update(rec.workspaces.meta())
    if recipe.autocast_dtype is not None and recipe.autocast_policy == "cuda":
        from .autocast_cuda import unmodelled_ops

        full_meta["capture.autocast_unmodelled"] = " ".join(unmodelled_ops()) or "none"
    full_meta.update(versions())
    full_meta.update(meta or {})
    if "capture.optimizer" in facts:   # the step's own optimizers, not the option's (mhc-torch capture)
        full_meta["capture.optimizer"] = facts["capture.optimizer"]
    return full_meta


def _flops_per_step(kernels, steps: int) -> list[dict[str, int]]:
    """Per step, the FLOPs of its kernels by phase (forward, backward, optimizer, ...)."""
    flops = [dict.fromkeys(store.PHASE_NAMES, 0) for _ in range(steps)]
    for k in kernels:
        if 0 <= k.step < steps:
            flops[k.step][store.PHASE_NAMES[k.phase]] += k.flops
    return flops


def _device_peak(allocs, device: int = 0) -> int:
    """The peak of live bytes on the device, frees before allocations at one instant (the
    order the simulator and `mhc info` use)."""
    events = []
    for a in allocs:
        if a.device == device:
            events.append((a.t_alloc, 1, a.bytes))
            if a.t_free is not None:
                events.append((a.t_free, 0, -a.bytes))
    live = peak = 0
    for _, _, delta in sorted(events):
        live += delta
        peak = max(peak, live)
    return peak


def _default_loss(model, batch):
    out = model(**batch) if isinstance(batch, dict) else model(*batch) if isinstance(batch, (tuple, list)) else model(batch)
    if hasattr(out, "loss") and out.loss is not None:
        return out.loss
    if isinstance(out, torch.Tensor):
        return out if out.dim() == 0 else out.float().mean()
    raise TypeError("the model's output has no .loss and is not a tensor; pass loss_fn")


def _build_optimizer(build_optimizer, model):
    """The model file's optimizer: an Optimizer over parameters of the model (each at most once:
    torch refuses a parameter in two groups), else one line saying what it returned."""
    opt = build_optimizer(model)
    if not isinstance(opt, torch.optim.Optimizer):
        raise CaptureError(f"build_optimizer(model) returned {a_kind(opt)}, not a torch.optim.Optimizer (one "
                           "optimizer; parameter groups of one's own go in it)")
    ours = {id(p) for p in model.parameters()}
    # mhc_torch.apply pasted into build_optimizer (what `mhc advise` prints): with the state on the
    # host the optimizer steps host copies of the model's parameters, paired in offloaded_params.
    ours.update(id(h) for p, h in getattr(opt, "offloaded_params", ()) if id(p) in ours)
    for g in opt.param_groups:
        for p in g["params"]:
            if id(p) not in ours:
                raise CaptureError(f"build_optimizer(model) returned an optimizer over a tensor of shape "
                                   f"{list(p.shape)} that is not a parameter of the model")
    return opt


# The batch is made a second time on the host's real tensors for its values only where it is no
# larger than this: a step's batch of tens of GiB (long video, large images) would take the
# host's memory for masks and labels the capture can go without.
_MOST_HOST_BATCH_BYTES = 1 << 30


def _batch_made(fake, device, make_batch):
    """(the batch, None) made by make_batch() on fake tensors; or, where it selects by value
    (a masked-language-model collator's `ids[mask] = MASK`, an `.item()`), which fake tensors
    cannot, (the batch made on the host's real tensors and then faked, where the op was): a
    DataLoader makes the batch on the host, and no op of make_batch() is in the trace either way,
    so only its tensors (their shapes and dtypes, then on the device) count."""
    try:
        with torch.device(device), BuiltForGpu(device, lambda: None) as making:
            with cuda_calls_on_fake_device(making):
                batch = make_batch()
        leaves = [t for t in tree_flatten(batch)[0] if isinstance(t, torch.Tensor)]
        if (any(not t.is_floating_point() for t in leaves)
                and sum(t.numel() * t.element_size() for t in leaves) <= _MOST_HOST_BATCH_BYTES):
            # its integer and boolean tensors' values, for ops that select or read by them
            try:
                with torch.random.fork_rng(devices=[]):
                    fake.shadows |= keep_batch_values(batch, _batch_on_host(make_batch)) > 0
            except Exception:  # noqa: BLE001 - a batch the host cannot make keeps no values
                pass
        return batch, None
    except Exception as e:
        err = _fake_error(e) or (_fake_error(e.__cause__ or e.__context__, e) if (e.__cause__ or e.__context__)
                                 else None)
        if err is None:
            raise
        if not str(err).startswith("op "):
            raise err from None   # no op to make on the host instead (a jagged nested tensor)
        # "op OP cannot run on fake tensors (at FILE:LINE in make_batch): ...": the op and its line
        m = re.match(r"op (\S+) cannot run on fake tensors(?: \(at (.*?)\))?:", str(err))
        why = f"{m.group(1)} at {m.group(2)}" if m and m.group(2) else m.group(1) if m else str(err)
    real = _batch_on_host(make_batch)
    batch = tree_map(lambda t: fake.from_tensor(t) if isinstance(t, torch.Tensor) else t, real)
    fake.shadows |= keep_batch_values(batch, real) > 0
    return batch, why


_HOST_BATCH_SEED = 0


def _batch_on_host(make_batch):
    """make_batch() on the host's real tensors (a DataLoader's), from torch's generator seeded
    alike in every capture (the process's own state put back after): the values the batch's
    selections follow, and so their shapes, are the same in the capture and in each capture
    `mhc advise --verify` makes again with a setting applied. Unseeded, a batch of random labels
    (adaptive softmax's clusters, a random mask) had other rows in each, and the verification
    compared two batches (adaptive_lm.py: a reserved error of 14.37% that was the batch's)."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(_HOST_BATCH_SEED)
        with unset_fake_temporarily(), torch.device("cpu"), BuiltForGpu("cpu", lambda: None) as making:
            with cuda_calls_on_fake_device(making):
                return make_batch()


def _run(rec, fake, build_model, make_batch, steps, loss_fn, optimizer, recipe, device, setting, build_optimizer=None):
    """The capture's stages under fake tensors: build the model, its optimizer and the setting,
    record what exists before the first step, make the batch, run the steps, and gather the facts.
    Returns (the layer names, each step's time, the module records, the facts for meta).
    What the stages return stays referenced here until _run returns (`params`, `trained`, the
    contexts, the tracker), so that no storage they hold dies earlier in the trace."""
    from . import data_parallel

    loss_fn = loss_fn or _default_loss
    with fake:
        model, building, allocator_at_build = _model_built(fake, build_model, device, recipe)
        allocator_conf = allocator_at_build
        opt, params, trained = _optimizer_built(model, recipe, optimizer, build_optimizer)
        facts = model_facts(model, opt)
        optimizer_setting = None
        if setting is not None:
            model, opt, optimizer_setting, allocator_conf = _setting_applied(model, opt, setting, recipe,
                                                                             allocator_conf)
        facts.update(data_parallel.prepare(model, rec))
        _held_before_the_step(rec, model, opt, building, facts)
        param_name = {id(p): n for n, p in params}
        param_name.update({id(h): param_name.get(id(p), "?") for p, h in getattr(opt, "offloaded_params", ())})
        layers = _layer_lists(model)
        tracker = _module_tracker(rec, model, layers)
        step_times = []
        batch = _batch_placed(rec, fake, device, make_batch, facts)
        run = StepRun(rec, model, opt, loss_fn, recipe, device, param_name, optimizer_setting)
        contexts = _step_contexts(rec, model, recipe, device)
        fsdp2 = _steps_recorded(rec, fake, model, run, batch, steps, recipe, device, tracker, contexts, step_times)
        rec.phase = "end"
        _facts_after_the_steps(rec, run, recipe, steps, facts, allocator_conf, allocator_at_build, fsdp2,
                               holds=contexts[-1])
        modules = rec.module_records(model)
        del run, opt, model, batch
    return list(layers), step_times, modules, facts


def _model_built(fake, build_model, device, recipe):
    """(the model as the step trains it: built, on the device, cast; the BuiltForGpu that watched
    the build; the allocator's settings when CUDA initialised)."""
    # PyTorch reads the allocator's settings once, when CUDA initialises: at build_model()'s
    # first CUDA tensor or CUDA call if it makes one (built_for_gpu.py), else by the time the
    # model is built and goes to the GPU, what the script set before (its first lines) counts
    at_init: list[str] = []
    building = BuiltForGpu(device, lambda: at_init.append(allocator_env()))
    # values kept while the model is built: torch.nn.utils.prune selects by a mask of ones
    # there (batch_values.py); in the step, only where the batch has integer tensors
    fake.shadows = True
    try:
        with torch.device(device), building, cuda_calls_on_fake_device(building):
            model = build_model()
    finally:
        fake.shadows = False
    allocator_at_build = at_init[0] if at_init else allocator_env()
    _readable_allocator_conf(allocator_at_build)
    if not isinstance(model, torch.nn.Module):
        raise CaptureError(f"build_model() returned {a_kind(model)}, not a torch.nn.Module")
    _refuse_compiled(model)
    if any(t.device.type != torch.device(device).type for t in list(model.parameters()) + list(model.buffers())):
        model = model.to(device)
    if recipe.param_dtype is not None:
        model = cast_model(model, recipe.param_dtype)
    return model, building, allocator_at_build


def _optimizer_built(model, recipe, optimizer, build_optimizer):
    """(the optimizer, the (name, parameter) pairs that require a gradient, the parameters it trains)."""
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    # A forward-only step never steps its optimizer: a frozen model's is built over its frozen parameters.
    trained = [p for _, p in params] or (list(model.parameters()) if recipe.forward_only else [])
    if not trained:
        raise CaptureError("the model has no parameters" if not list(model.parameters()) else
                           "the model has no parameter that requires a gradient: a training step has nothing to "
                           "train; capture its inference step with --forward-only (forward_only=True)")
    if build_optimizer is not None:
        opt = _build_optimizer(build_optimizer, model)
    else:
        opt = (optimizer or (lambda ps: torch.optim.AdamW(ps, lr=1e-4, foreach=True)))(trained)
    return opt, params, trained


def _setting_applied(model, opt, setting, recipe, allocator_conf):
    """(model, optimizer) with the setting applied by mhc_torch.apply, the setting's optimizer part
    left for the step function (or None), and the allocator's settings with the setting's."""
    from .applying import apply
    from .settings import load_setting

    optimizer_setting = None
    # A step function may train with an optimizer it builds itself: the setting's optimizer
    # part waits until the step shows which optimizer trains (StepRun._settle).
    setting = load_setting(setting)
    if recipe.step is not None and setting.get("optimizer"):
        optimizer_setting = setting["optimizer"]
        setting = {k: v for k, v in setting.items() if k != "optimizer"}
    with _environment_kept(ALLOCATOR_ENV):   # its allocator is set at run time: recorded below
        model, opt = apply(model, opt, setting)
    if setting.get("allocator"):
        allocator_conf = ",".join(c for c in (allocator_conf, setting["allocator"]) if c)
    return model, opt, optimizer_setting, allocator_conf


def _held_before_the_step(rec, model, opt, building, facts) -> None:
    """Records what the step finds in memory: parameters, buffers, an optimizer's host copies and
    what build_model left alive."""
    for n, p in model.named_parameters():
        rec.set_category(p, store.PARAM, n)
    for n, b in model.named_buffers():
        rec.set_category(b, store.OTHER, f"buffer {n}")
    # host copies an optimizer on the host steps (apply made them, before the step): host
    # memory from the step's start, where they counted only from the host step's first use of
    # each, so the host peak lacked the copies of every parameter stepped after the peak's
    host_names = {id(p): n for n, p in model.named_parameters()}
    for p, h in getattr(opt, "offloaded_params", ()):
        rec.track(h, None, f"{host_names.get(id(p), '?')} (host copy)")
    gc.collect()
    for st in building.alive():   # held since build_model (a plain attribute, a cache): on the device all along
        rec._track_storage(st, store.OTHER, "held since build_model")
    if building.cuda_initialised:
        facts["capture.cuda_init"] = "build_model"


def _module_tracker(rec, model, layers):
    """The ModTracker that names each kernel's module, and through it the layer a kernel runs in."""
    tracker = _leaf_safe_mod_tracker()
    # Names from the model's root, also for modules a step calls directly (a GAN's netG and
    # netD in a model that is never called itself): ModTracker names a module the first time
    # it runs, from the outermost module then running, so netD alone was "Discriminator",
    # a name the model file's model cannot resolve (mhc_torch.apply refused the setting).
    if hasattr(tracker, "_get_mod_name"):
        tracker._get_mod_name(model)

    rec.layer_of = lambda: _current_layer(tracker.parents, layers, rec.phase == "backward")
    rec.track_modules(tracker)
    rec.set_model(model)
    return tracker


def _batch_placed(rec, fake, device, make_batch, facts):
    """The step's batch, made once, on the model's device, recorded as such (and its size in facts)."""
    batch, on_host = _batch_made(fake, device, make_batch)
    if on_host:
        facts["capture.batch_on_host"] = on_host
    # a batch made on "cuda" (as the training script has it) goes where the model went
    batch = tree_map(lambda t: t.to(device) if isinstance(t, torch.Tensor) and t.device.type != torch.device(
        device).type else t, batch)
    for t in tree_flatten(batch)[0]:
        if isinstance(t, torch.Tensor):
            rec.set_category(t, store.OTHER, "batch")
    # the batch's size as the printed code needs it (DeepSpeed's train_micro_batch_size_per_gpu):
    # the leading dimension of its first tensor that has one
    leading = next((t.shape[0] for t in tree_flatten(batch)[0] if isinstance(t, torch.Tensor) and t.dim() > 0),
                   None)
    if leading is not None:
        facts["capture.batch_size"] = str(int(leading))
    return batch


def _step_contexts(rec, model, recipe, device):
    """The contexts made before the steps that make torch on the fake CPU tensors run as on the GPU
    (no-ops on another device), in the order entered; the last, FrameHolds, is needed after."""
    from .frame_holds import FrameHolds

    on_cpu = torch.device(device).type == "cpu"
    kernels = gpu_paths.kernels_as_on_gpu() if on_cpu else contextlib.nullcontext()
    rnns = _together(cudnn_rnn.rnn_as_on_gpu(recipe.autocast_policy == "cuda"),
                     torchvision_ops.autocast_as_on_cuda(recipe.autocast_policy == "cuda")) if on_cpu \
        else contextlib.nullcontext()
    ctc = ctc_loss.ctc_on_fake()
    foreach = gpu_paths.foreach_as_on_gpu() if on_cpu else contextlib.nullcontext()
    user_autocast = user_cuda_autocast(torch.device(device).type) if on_cpu else contextlib.nullcontext()
    cuda_calls = cuda_calls_in_step(rec, rec.spec.device_name) if on_cpu else contextlib.nullcontext()
    cuda_tensors = CudaInStep(device, rec) if on_cpu else contextlib.nullcontext()
    holds = FrameHolds(rec, model, keep_reads=on_cpu)
    if on_cpu:   # one `with` item: Python allows 20 blocks nested
        user_autocast = _together(user_autocast, _save_on_cpu_as_offload(model, rec),
                                  _user_saved_hooks_recorded(rec), _functorch_beside_capture(rec),
                                  generation.generate_on_fake(rec))
    return kernels, rnns, ctc, foreach, user_autocast, cuda_calls, cuda_tensors, holds


def _steps_recorded(rec, fake, model, run, batch, steps, recipe, device, tracker, contexts, step_times):
    """Runs the steps, each a step marker, its time appended to step_times; returns FSDP2's
    follower (None without FSDP2)."""
    from . import data_parallel, placement

    kernels, rnns, ctc, foreach, user_autocast, cuda_calls, cuda_tensors, holds = contexts
    with placement.listening(rec), recipes.autocast_kernels(device, recipe), tracker, fake.recording_to(rec), run, \
            _collector_at_step_ends(), kernels, rnns, ctc, foreach, user_autocast, cuda_calls, cuda_tensors, \
            gpu_paths.transformers_masks_as_on_gpu(), gpu_paths.grouped_mm_as_on_gpu(), \
            _together(holds, model_cache.model_cache_updates(rec, model), graph_freeing_backwards_counted(rec)), \
            data_parallel.following_fsdp2(model, rec, fake) as fsdp2:
        for s in range(steps):
            rec.step, rec.phase = s, "forward"
            t0 = rec.t
            with rec.saved_hooks():
                run.run_step(s, batch)
            gc.collect()  # storages held only by reference cycles end here, not at a random op
            rec.end_backward()
            rec.markers.append(store.Marker("step", t0, rec.t, store.MARKER_STEP, s))
            step_times.append(rec.t - t0)
    return fsdp2


def _facts_after_the_steps(rec, run, recipe, steps, facts, allocator_conf, allocator_at_build, fsdp2, holds) -> None:
    """Adds to facts what the steps showed: the allocator's settings, FSDP2's, what frames held,
    the optimizers and schedulers that trained, and what the recording counted."""
    if allocator_conf:
        facts["allocator.conf"] = allocator_conf
    if allocator_env() != allocator_at_build:
        facts["capture.allocator_conf_late"] = allocator_env()
    if fsdp2 is not None:
        facts.update(fsdp2.meta())
    facts.update(holds.meta({a for a, _, _ in rec.saved_pairs()}))
    facts.update(run.adopted_facts)
    facts.update(lr_scheduler_meta(run.optimizer))
    if rec.reserved_asked:
        facts["capture.reserved_asked"] = ", ".join(rec.reserved_asked)
    facts.update(_accumulation(recipe, rec, run, steps))
    _own_optimizers(recipe, run, facts)
    facts.update(rec.unpack_meta())
    facts.update(rec.pack_meta())
    facts.update(rec.calls_meta())
    facts.update(rec.args_meta())
    facts.update(rec.unregistered_meta())
