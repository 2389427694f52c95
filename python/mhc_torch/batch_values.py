"""The values of the batch's integer and boolean tensors, kept beside their fake tensors: a
selection by a mask the data loader made (VideoMAE's `bool_masked_pos`, `x[mask]` over the masked
tokens), a count or a maximum read from the labels (`labels.max() >= vocab_size`) has the shape or
value a GPU would have. The batch is made once more on real host tensors (a DataLoader makes it on
the host) and each non-float tensor of it that matches its fake one in shape and dtype is kept as
its *shadow*. An op whose tensor inputs all have shadows runs on them too (on the host, as its
real kernel: small tensors only) and its outputs get theirs; an op that cannot run on fake
tensors because its output's shape or value depends on the values (nonzero, x[mask],
masked_select, .item()) is answered from the shadows. A shadow holds while its fake tensor's
version counter is the one it was made at: a write in place that did not run on the shadows ends
it, and the op is refused as before."""
from __future__ import annotations

import functools

import torch
from torch.utils._pytree import tree_flatten, tree_map

_MOST = 1 << 22  # elements a shadow may have: mask and label sized, never activations
_ATTR = "_mhc_shadow"
_aten = torch.ops.aten
_BOOL_INDEXED = {_aten.index.Tensor: 1, _aten.index_put.default: 1, _aten.index_put_.default: 1,
                 _aten._index_put_impl_.default: 1}


def shadow_of(t) -> torch.Tensor | None:
    """t's real values, or None (none kept, or t written since in a way they did not follow)."""
    s = getattr(t, _ATTR, None) if isinstance(t, torch.Tensor) else None
    if s is None:
        return None
    real, version = s
    return real if t._version == version else None


def _keep(fake: torch.Tensor, real: torch.Tensor, version=None) -> None:
    """real kept as fake's values, under version (a callable: the version fake will have once the
    op that made it has returned), else fake's version now. Never for an inference tensor (made
    under torch.inference_mode): it has no version counter to tell a later write by."""
    if fake.is_inference():
        return
    if real.numel() <= _MOST and tuple(real.shape) == tuple(fake.shape) and real.dtype == fake.dtype:
        setattr(fake, _ATTR, (real, fake._version if version is None else version()))


def _written_args(func, args, kwargs):
    """The tensors an op writes in place (its schema's `Tensor(a!)` arguments)."""
    out = []
    for i, arg in enumerate(func._schema.arguments):
        if arg.alias_info is not None and arg.alias_info.is_write:
            value = args[i] if i < len(args) and not arg.kwarg_only else kwargs.get(arg.name)
            if isinstance(value, torch.Tensor):
                out.append(value)
    return out


def _version_after(func, i: int, fake: torch.Tensor, base) -> int:
    """The version counter fake will read once the op has returned. The op runs below autograd's
    ADInplaceOrView kernel, which bumps a tensor written in place after the op and makes a view
    share its base's counter after it: an output recorded at the version it has during the op (a
    view's fresh 0, a write's old count) lost its values at the next op (ids[:, 1:] of a batch
    written in place once, or a mask written in the forward)."""
    rets = func._schema.returns
    alias = rets[min(i, len(rets) - 1)].alias_info if rets else None
    if alias is None:
        return fake._version
    if alias.is_write:
        return fake._version + 1
    return base._version if isinstance(base, torch.Tensor) and not base.is_inference() else fake._version


def keep_batch_values(fake_batch, real_batch) -> int:
    """Shadows for the fake batch's integer and boolean tensors from the same leaves of the real
    batch (made by the same make_batch() on the host); the number kept. Leaves whose shape or dtype
    differ (a batch of random shape) keep none."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    with unset_fake_temporarily():
        return _keep_leaves(fake_batch, real_batch)


def _keep_leaves(fake_batch, real_batch) -> int:
    fakes, spec = tree_flatten(fake_batch)
    reals, real_spec = tree_flatten(real_batch)
    if spec != real_spec:
        return 0
    kept = 0
    for f, r in zip(fakes, reals):
        if (isinstance(f, torch.Tensor) and isinstance(r, torch.Tensor) and not f.is_floating_point()
                and not f.is_complex() and f.layout == torch.strided):
            _keep(f, r)
            kept += shadow_of(f) is not None
    return kept


def _tensors(args, kwargs):
    return [a for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)]


def _on_host(args, kwargs):
    """args and kwargs with each tensor its shadow and any device the host."""
    def real(a):
        return shadow_of(a) if isinstance(a, torch.Tensor) else a
    kwargs = dict(kwargs)
    if "device" in kwargs:
        kwargs["device"] = torch.device("cpu")
    kwargs.pop("pin_memory", None)
    return tree_map(real, args), tree_map(real, kwargs)


def all_shadowed(args, kwargs) -> bool:
    ts = _tensors(args, kwargs)
    return bool(ts) and all(shadow_of(t) is not None for t in ts)


def follow(func, args, kwargs, out) -> None:
    """After an op ran on fake tensors whose inputs all have shadows: runs it on the shadows and
    gives each fake output the real one's values (a write in place: the written input's shadow
    follows). Ops the host cannot run, or whose results do not match, leave no shadow. An op with
    no tensor input that makes integer or boolean values by rule (arange, zeros, full: positions
    compared with the lengths, the indices pack_padded_sequence inverts) gets them too; a random
    one (randint, randperm) does not: the GPU's draws are not the host's."""
    fouts, _ = tree_flatten(out)
    if not _tensors(args, kwargs):
        if (torch.Tag.nondeterministic_seeded in func.tags or not fouts
                or any(not isinstance(f, torch.Tensor) or f.is_floating_point() or f.is_complex() for f in fouts)):
            return
    elif not all_shadowed(args, kwargs):
        return
    # never a large result on the host (one_hot of the labels over a vocabulary): it keeps no values
    if any(isinstance(f, torch.Tensor) and f.numel() > _MOST for f in fouts):
        return
    rargs, rkwargs = _on_host(args, kwargs)
    try:
        real = func(*rargs, **rkwargs)
    except Exception:
        return
    routs, _ = tree_flatten(real)
    if len(fouts) != len(routs):
        return
    base = next(iter(_tensors(args, kwargs)), None)  # what a view op's outputs alias (its self)
    for i, (f, r) in enumerate(zip(fouts, routs)):
        if isinstance(f, torch.Tensor) and isinstance(r, torch.Tensor):
            _keep(f, r, functools.partial(_version_after, func, i, f, base))
    # a write in place: the written input's shadow was written too (its version moves with the op)
    for a in _written_args(func, args, kwargs):
        if getattr(a, _ATTR, None) is not None and not a.is_inference():
            setattr(a, _ATTR, (getattr(a, _ATTR)[0], a._version + 1))


def bool_indices_as_long(func, args, fake_like):
    """args of x[mask] (index.Tensor) or x[mask] = v (index_put) with each boolean index that has a
    shadow replaced by the long indices of its True places (what the GPU's kernel runs nonzero for),
    fake tensors with shadows; None when there is none to replace."""
    pos = _BOOL_INDEXED.get(func)
    if pos is None or len(args) <= pos or not isinstance(args[pos], (list, tuple)):
        return None
    indices, changed = [], False
    for idx in args[pos]:
        real = shadow_of(idx) if isinstance(idx, torch.Tensor) and idx.dtype in (torch.bool, torch.uint8) else None
        if real is None:
            indices.append(idx)
            continue
        changed = True
        for col in real.bool().nonzero().unbind(1):
            long = fake_like(tuple(col.shape), (1,), torch.long, idx.device)
            _keep(long, col)
            indices.append(long)
    if not changed:
        return None
    return (*args[:pos], indices, *args[pos + 1:])


def answered(func, args, kwargs, fake_like):
    """The result of an op whose output shape or value depends on values (it raised on fake
    tensors), from the shadows of its inputs: fake outputs of the real ones' shapes and dtypes with
    those as their shadows (fake_like(shape, stride, dtype, device) makes one), a Python number
    for .item(); None where an input has no shadow."""
    if func is _aten._pack_padded_sequence.default:
        return _packed(args, kwargs, fake_like)
    if not all_shadowed(args, kwargs):
        return None
    rargs, rkwargs = _on_host(args, kwargs)
    try:
        real = func(*rargs, **rkwargs)
    except Exception:
        return None
    device = _tensors(args, kwargs)[0].device

    def fake(r):
        if not isinstance(r, torch.Tensor):
            return r
        f = fake_like(tuple(r.shape), tuple(r.stride()), r.dtype, device)
        _keep(f, r)
        return f

    return tree_map(fake, real)


def _packed(args, kwargs, fake_like):
    """pack_padded_sequence's op from the lengths' values alone (the input is activations, with no
    values kept): the packed data, of sum(lengths) rows, and batch_sizes, on the lengths' device
    (the host, as PyTorch asks) with its values kept for the RNN and pad_packed_sequence that read
    them. PyTorch's kernel is run on the host over an input of one value per position, so its
    checks (lengths sorted, none zero) and its batch_sizes are its own."""
    input, lengths = (list(args) + [kwargs.get("input"), kwargs.get("lengths")])[:2]
    batch_first = args[2] if len(args) > 2 else kwargs.get("batch_first", False)
    real = shadow_of(lengths)
    if real is None or not isinstance(input, torch.Tensor) or input.dim() < 2:
        return None
    positions = torch.zeros(tuple(input.shape[:2]) + (1,))
    data, batch_sizes = _aten._pack_padded_sequence.default(positions, real, batch_first)
    shape = (int(data.shape[0]), *input.shape[2:])
    stride = tuple(torch.empty(shape, device="meta").stride())
    out = fake_like(shape, stride, input.dtype, input.device)
    sizes = fake_like(tuple(batch_sizes.shape), (1,), batch_sizes.dtype, lengths.device)
    _keep(sizes, batch_sizes)
    return out, sizes
