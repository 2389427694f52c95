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
it, and the op is refused as before. A tensor filled with one value (`ones_like`, `zeros`, `full`,
`fill_`, of any dtype and size) keeps that one value, expanded to its shape, so a mask of ones
that torch.nn.utils.prune selects by (`t[mask == 1]`) has its size whatever the model's."""
from __future__ import annotations

import functools

import torch
from torch.utils import _pytree
from torch.utils._pytree import tree_flatten, tree_map

_MOST = 1 << 22  # elements a shadow may have: mask and label sized, never activations
_ATTR = "_mhc_shadow"
_aten = torch.ops.aten
_BOOL_INDEXED = {_aten.index.Tensor: 1, _aten.index_put.default: 1, _aten.index_put_.default: 1,
                 _aten._index_put_impl_.default: 1}


def _constant(real) -> bool:
    """Whether a shadow is one value expanded to its shape (a fill's): no stride moves. Only a
    strided tensor can be: a sparse one has no strides (an empty tuple, all of whose none move)."""
    return real.layout == torch.strided and all(st == 0 for st in real.stride())


class _Shadow(tuple):
    """(real values, the version they hold at). A copy of the fake tensor (copy.deepcopy of a
    module: MoCo's momentum encoder, an EMA) keeps none: deepcopy of its __dict__ would copy the
    host tensor inside the fake mode, which torch refuses (`set the storage of a tensor on device
    "meta" to a storage on different device "cpu"`)."""

    def __deepcopy__(self, memo):
        return None


# Whether a fake tensor's FakeTensorMode constant counts as its values (set while an optimizer
# steps: optimizers.step_values_kept).
constants_kept = False


def _constant_of(t) -> torch.Tensor | None:
    """The constant FakeTensorMode keeps for a one-element strided fake tensor made from a Python
    number (torch.as_tensor(lr), ASGD's next eta and mu), where constants_kept: the mode drops it
    at a write it does not follow."""
    if not constants_kept or not isinstance(t, torch.Tensor) or t.layout != torch.strided:
        return None
    c = getattr(t, "constant", None)
    return c if isinstance(c, torch.Tensor) and c.layout == torch.strided and c.numel() == 1 else None


def shadow_of(t) -> torch.Tensor | None:
    """t's real values, or None (none kept, or t written since in a way they did not follow)."""
    s = getattr(t, _ATTR, None) if isinstance(t, torch.Tensor) else None
    if s is None:
        return _constant_of(t)
    real, version = s
    return real if t._version == version else None


def _keep(fake: torch.Tensor, real: torch.Tensor, version=None) -> None:
    """real kept as fake's values, under version (a callable: the version fake will have once the
    op that made it has returned), else fake's version now. Never for an inference tensor (made
    under torch.inference_mode): it has no version counter to tell a later write by. Never for a
    sparse tensor (nn.Embedding(sparse=True)'s gradient of a loss that sums the lookups, made from
    the ids' values and a constant gradient): it was taken for a fill (no strides), and the capture
    stopped on `reshape is not implemented for sparse tensors`."""
    if fake.is_inference() or fake.layout != torch.strided or real.layout != torch.strided:
        return
    if ((real.numel() <= _MOST or _constant(real)) and tuple(real.shape) == tuple(fake.shape)
            and real.dtype == fake.dtype):
        setattr(fake, _ATTR, _Shadow((real, fake._version if version is None else version())))


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
    """The tensors among tree_flatten((args, kwargs))'s leaves, in its order. It runs for every op
    of a step whose batch has integer tensors, and tree_flatten builds a spec of every tuple and
    list in an op's arguments (each shape): the tuples, lists and dicts are walked here, any other
    pytree node (a namedtuple, a registered class) by tree_flatten."""
    if not _PLAIN_NODES:
        return [a for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)]
    out: list = []
    _add_tensors((args, kwargs), out)
    return out


def _standard_nodes() -> bool:
    """Whether tree_flatten flattens tuples and lists to their items and dicts to their values."""
    nodes = _pytree.SUPPORTED_NODES
    return all(t in nodes for t in (tuple, list, dict)) and (
        nodes[tuple].flatten_fn is _pytree._tuple_flatten and nodes[list].flatten_fn is _pytree._list_flatten
        and nodes[dict].flatten_fn is _pytree._dict_flatten)


_PLAIN_NODES = _standard_nodes()


def _add_tensors(node, out: list) -> None:
    """The tensors among the leaves under `node` (a tuple, a list or a dict), appended in
    tree_flatten's order. A leaf is what tree_flatten takes for one: a value whose type is not a
    registered node and not a namedtuple's."""
    nodes = _pytree.SUPPORTED_NODES
    for c in (node.values() if type(node) is dict else node):
        tp = type(c)
        if tp is tuple or tp is list or tp is dict:
            _add_tensors(c, out)
        elif tp in nodes or (issubclass(tp, tuple) and _pytree.is_namedtuple_class(tp)):
            out += [a for a in tree_flatten(c)[0] if isinstance(a, torch.Tensor)]
        elif isinstance(c, torch.Tensor):
            out.append(c)


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


# Ops that fill their output, or self in place, with one value: the value, or the argument naming it.
_FILLS = {_aten.ones.default: 1, _aten.ones_like.default: 1, _aten.new_ones.default: 1, _aten.zeros.default: 0,
          _aten.zeros_like.default: 0, _aten.new_zeros.default: 0, _aten.zero_.default: 0,
          _aten.full.default: "fill_value", _aten.full_like.default: "fill_value",
          _aten.new_full.default: "fill_value", _aten.fill_.Scalar: "value"}
# Ops whose output values are all taken from self's (a selection by indices that need no values).
_SELECTS = {_aten.index.Tensor, _aten.index_select.default, _aten.gather.default}
# Ops whose output values are all their inputs' (copies, concatenations): views are found by schema.
_MOVES = {_aten.clone.default, _aten._to_copy.default, _aten._unsafe_view.default, _aten.cat.default,
          _aten.stack.default, _aten.repeat.default, _aten.contiguous.default} | _SELECTS


def _fill_value(func, args, kwargs):
    value = _FILLS.get(func)
    if not isinstance(value, str):
        return value
    for i, arg in enumerate(func._schema.arguments):
        if arg.name == value:
            v = args[i] if i < len(args) and not arg.kwarg_only else kwargs.get(value)
            return v if isinstance(v, (bool, int, float)) else None
    return None


def _keep_constant(func, i, f, base, value) -> None:
    if isinstance(f, torch.Tensor) and f.layout == torch.strided:
        real = torch.full((), value, dtype=f.dtype, device="cpu").expand(tuple(f.shape))
        _keep(f, real, functools.partial(_version_after, func, i, f, base))


def _followed_as_constants(func, args, kwargs, fouts, ts) -> bool:
    """Ops over tensors of one value each, whatever their size: a fill gives its value, a
    pointwise op runs on one element of each, a copy, concatenation, view or selection of tensors
    of one same value has it. False where the op is none of those (the general path follows);
    ts: _tensors(args, kwargs)."""
    base = next(iter(ts), None)
    value = _fill_value(func, args, kwargs)
    if value is not None:
        for i, f in enumerate(fouts):
            _keep_constant(func, i, f, base, value)
        return True
    reals = [shadow_of(t) for t in (ts[:1] if func in _SELECTS else ts)]
    if not reals or any(r is None or not _constant(r) or r.numel() == 0 for r in reals):
        return False
    if torch.Tag.pointwise in func.tags:
        def one(a):
            if not isinstance(a, torch.Tensor):
                return a
            r = shadow_of(a)
            return r.as_strided([1] * r.dim(), [0] * r.dim())
        try:
            real = func(*tree_map(one, args), **tree_map(one, {k: v for k, v in kwargs.items() if k != "device"}))
        except Exception:
            return True
        for i, (f, r) in enumerate(zip(fouts, tree_flatten(real)[0])):
            if isinstance(r, torch.Tensor) and r.numel() == 1:
                _keep_constant(func, i, f, base, r.reshape(()).item())
        return True
    values = {r.reshape(-1)[0].item() for r in reals}
    if len(values) != 1 or not (func in _MOVES or func.is_view):
        return False
    value = values.pop()
    for i, f in enumerate(fouts):
        _keep_constant(func, i, f, base, value)
    return True


# A sparse COO tensor's indices where the batch's values give them (nn.Embedding(sparse=True)'s
# gradient is made from the ids): an attribute of the fake sparse tensor, the real int64 indices.
_ROWS = "_mhc_sparse_indices"
_SPARSE_NEW = getattr(_aten, "_sparse_coo_tensor_with_dims_and_tensors", None)
_SPARSE_NEW = _SPARSE_NEW.default if _SPARSE_NEW is not None else None


def sparse_entries(func, source) -> tuple:
    """(the entries a GPU's result of `func` has, their real indices or None) for the ops that keep
    a sparse input's entries (fake_mode._sparse_rows_kept: the autograd engine's clone, coalesce,
    sparse_mask, a transpose), `source` the sparse tensor whose entries they keep: coalesce keeps
    each distinct index once, which the indices' values tell (SparseAdam and Adagrad coalesce an
    embedding's gradient: a batch's repeated ids are one row each, on a GPU as on a CPU); without
    them, every entry (an upper bound)."""
    real = getattr(source, _ROWS, None)
    if real is None or real.shape[1] != source._nnz():
        return source._nnz(), None
    if func is _aten._coalesce.default:
        real = torch.unique(real, dim=1)
    elif func in (_aten.t.default, _aten.transpose.int):
        real = real.flip(0) if real.shape[0] == 2 else None
    return (source._nnz() if real is None else int(real.shape[1])), real


def keep_sparse_entries(out, real) -> None:
    """real (int64, sparse dims x entries) kept as the sparse fake tensor out's indices."""
    if real is not None and isinstance(out, torch.Tensor) and out.layout == torch.sparse_coo:
        setattr(out, _ROWS, real)


def _follow_sparse(func, args, out) -> bool:
    """A sparse tensor made from indices with values (the embedding's gradient), and the indices
    of one whose entries are known (`grad._indices()`, which a host copy or a step reads): True
    where the op was one of those."""
    if func is _SPARSE_NEW and _SPARSE_NEW is not None:
        real = shadow_of(args[3]) if len(args) > 3 and isinstance(args[3], torch.Tensor) else None
        if real is not None and real.dim() == 2 and real.shape[1] == out._nnz():
            keep_sparse_entries(out, real)
        return True
    if func in (_aten._indices.default, _aten.indices.default) and isinstance(out, torch.Tensor):
        real = getattr(args[0], _ROWS, None)
        if real is not None:
            _keep(out, real)
        return True
    return False


def follow(func, args, kwargs, out) -> None:
    """After an op ran on fake tensors whose inputs all have shadows: runs it on the shadows and
    gives each fake output the real one's values (a write in place: the written input's shadow
    follows). Ops the host cannot run, or whose results do not match, leave no shadow. An op with
    no tensor input that makes integer or boolean values by rule (arange, zeros, full: positions
    compared with the lengths, the indices pack_padded_sequence inverts) gets them too; a random
    one (randint, randperm) does not: the GPU's draws are not the host's."""
    if _follow_sparse(func, args, out):
        return
    fouts, _ = tree_flatten(out)
    if torch.Tag.nondeterministic_seeded in func.tags:   # a draw (bernoulli of a fill): the GPU's, not the host's
        return
    ts = _tensors(args, kwargs)   # read once: the op ran on the fake tensors and left args as they were
    if _followed_as_constants(func, args, kwargs, fouts, ts):
        return
    if not ts:
        if (torch.Tag.nondeterministic_seeded in func.tags or not fouts
                or any(not isinstance(f, torch.Tensor) or f.is_floating_point() or f.is_complex() for f in fouts)):
            return
    elif not all(shadow_of(t) is not None for t in ts):
        return
    # never a large result on the host (one_hot of the labels over a vocabulary): it keeps no values
    if any(isinstance(f, torch.Tensor) and f.numel() > _MOST for f in fouts):
        return
    if not _writable_shadows(func, args, kwargs):
        return
    rargs, rkwargs = _on_host(args, kwargs)
    try:
        real = func(*rargs, **rkwargs)
    except Exception:
        return
    routs, _ = tree_flatten(real)
    if len(fouts) != len(routs):
        return
    base = next(iter(ts), None)  # what a view op's outputs alias (its self)
    for i, (f, r) in enumerate(zip(fouts, routs)):
        if isinstance(f, torch.Tensor) and isinstance(r, torch.Tensor):
            _keep(f, r, functools.partial(_version_after, func, i, f, base))
    # a write in place: the written input's shadow was written too (its version moves with the op)
    for a in _written_args(func, args, kwargs):
        if getattr(a, _ATTR, None) is not None and not a.is_inference():
            setattr(a, _ATTR, _Shadow((getattr(a, _ATTR)[0], a._version + 1)))


def _writable_shadows(func, args, kwargs) -> bool:
    """Whether the op's writes in place can run on the shadows: a fill's shadow is one value
    expanded (no memory of its own), and a write into it on the host wrote every written place
    into that one element (a replay buffer made with zeros and written at rows from the batch, or
    a mask written at the batch's indices: each place then held the last value written, and
    PyTorch warned "Use of index_put_ on expanded tensors is deprecated"). Such a shadow takes
    memory of its own first where it is no larger than a batch's values may be; a larger one is
    not followed (the write ends its values, as a write that did not run on them does)."""
    for a in _written_args(func, args, kwargs):
        real = shadow_of(a)
        if real is None or not _constant(real) or real.numel() <= 1:
            continue
        if real.numel() > _MOST:
            return False
        setattr(a, _ATTR, _Shadow((real.clone(memory_format=torch.contiguous_format), a._version)))
    return True


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
        if real.numel() > _MOST:   # one value (a fill's): all places or none, no host nonzero
            n = real.numel() if bool(real.reshape(-1)[0]) else 0
            indices += [fake_like((n,), (1,), torch.long, idx.device) for _ in range(real.dim())]
            continue
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
    if func is _aten.nonzero.default and args[0].numel() > _MOST:   # a fill's mask: all places or none
        n = args[0].numel() if bool(shadow_of(args[0]).reshape(-1)[0]) else 0
        return fake_like((n, args[0].dim()), (args[0].dim(), 1), torch.long, args[0].device)
    if not _writable_shadows(func, args, kwargs):
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
