"""The storages that a Python frame's variables refer to, for the capture's frame holds
(frame_holds.py): the tensors in a value, also inside tuples, lists and dicts (and their subclasses:
transformers' ModelOutput) nested up to four deep, and the storage under each.

It runs at every return of the model's Python in the forward, over the variables of every model
frame up the stack; diffusers' EMAModel.step holds a list of every parameter while it calls two
helpers a parameter, so a step read 3 million tensors there. A tensor's dense parts (its own
storage, or a sparse COO tensor's indices and values, a DTensor's local shard, the tensor that
functorch's wrapper wraps) do not change while the tensor lives, so a tensor that is its own only
part is remembered (a weak reference tells it from a later object at the same address) and only its
storage is read again; the storage is read each time (`set_` and `.data =` change it).
"""
from __future__ import annotations

import types
import weakref

import torch

from .op_schema import _dense_parts

DEPTH = 4       # containers read inside containers (a dict of lists of tensors: 2)
ITEMS = 4096    # a container longer than this is not read (a frame's list of every layer's cache)
_wrapped = torch._C._functorch.is_functorch_wrapped_tensor


def storage_of(t: torch.Tensor):
    """The storage under `t`: inside torch.func's transforms (vmap, grad) the model's Python sees
    functorch's wrappers, which have none ("Cannot access storage of TensorWrapper"); the capture
    records the tensor they wrap."""
    while _wrapped(t):
        t = torch._C._functorch.get_unwrapped(t)
    return t.untyped_storage()


def tensors(value, returned, depth: int = DEPTH):
    """The tensors in `value` (their dense parts), other than `returned`."""
    if isinstance(value, torch.Tensor):
        if value is not returned:
            yield from _dense_parts(value)
    elif depth > 0 and isinstance(value, (tuple, list, dict)):
        items = value.values() if isinstance(value, dict) else value
        if len(items) <= ITEMS:
            for v in items:
                yield from tensors(v, returned, depth - 1)


# isinstance(v, cls) asks v.__class__ where type(v) is not a subclass of cls: a type can tell for all
# its values only where that is type(v) (object's attribute lookup, no `__class__` of its own) and
# torch.Tensor's metaclass has no isinstance check of its own
_BY_TYPE = type(torch.Tensor).__instancecheck__ is type.__instancecheck__


# built-in types whose attribute lookup is object's (each has a __getattribute__ of its own name)
_PLAIN = {int, float, bool, complex, str, bytes, type(None), type(Ellipsis), types.FunctionType,
          types.BuiltinFunctionType, types.MethodType, types.ModuleType, torch.dtype, torch.device,
          torch.layout, torch.memory_format}


def _holds_no_tensor(tp: type) -> bool:
    """Whether no value of type tp is a tensor, a tuple, a list or a dict to isinstance: one of
    the built-in types above, or a class that keeps object's attribute lookup and `__class__`."""
    if not _BY_TYPE or issubclass(tp, (torch.Tensor, tuple, list, dict)):
        return False
    return tp in _PLAIN or (tp.__getattribute__ is object.__getattribute__
                            and not any("__class__" in vars(c) for c in tp.__mro__ if c is not object))


class StorageKeys:
    """id(storage_of(t)) for each t of tensors(value, skip), appended to a list: the same tensors
    in the same order, read without a generator a level."""

    def __init__(self):
        self._plain: dict[int, weakref.ref] = {}   # id(tensor) -> the tensor, its own only dense part
        self._types: dict[type, bool] = {}   # type -> whether its values hold no tensor (_holds_no_tensor)

    def add_values(self, values, skip, out: list, seen: set | None = None, added: list | None = None) -> None:
        """add() of each of a frame's values, in order, but those of a type that holds no tensor
        (None, a number, a module: most of a frame's) and, with `seen`, those whose id is in it
        (read already for this set of frames: their keys are out already); adds the ids read to
        `seen` (and to `added`)."""
        types, add = self._types, self.add
        for value in values:
            tp = type(value)
            none = types.get(tp)
            if none is None:
                none = types[tp] = _holds_no_tensor(tp)
            if none:
                continue
            if seen is not None:
                i = id(value)
                if i in seen:
                    continue
                seen.add(i)
                if added is not None:
                    added.append(i)
            add(value, skip, out)

    def add(self, value, skip, out: list, depth: int = DEPTH) -> None:
        if isinstance(value, torch.Tensor):
            if value is not skip:
                ref = self._plain.get(id(value))
                if ref is not None and ref() is value:
                    out.append(id(value.untyped_storage()))
                else:
                    self._parts(value, out)
        elif depth > 0 and isinstance(value, (tuple, list, dict)):
            items = value.values() if isinstance(value, dict) else value
            if len(items) <= ITEMS:
                types, plain = self._types, self._plain
                for v in items:
                    tp = type(v)
                    none = types.get(tp)
                    if none is None:
                        none = types[tp] = _holds_no_tensor(tp)
                    if none:   # an item that holds no tensor adds nothing (a shape's ints, a None)
                        continue
                    if v is not skip and isinstance(v, torch.Tensor):   # add()'s first case, without a call
                        ref = plain.get(id(v))
                        if ref is not None and ref() is v:
                            out.append(id(v.untyped_storage()))
                            continue
                    self.add(v, skip, out, depth - 1)

    def _parts(self, t: torch.Tensor, out: list) -> None:
        parts = _dense_parts(t)
        for p in parts:
            out.append(id(storage_of(p)))
        if len(parts) == 1 and parts[0] is t and not _wrapped(t):
            try:
                self._plain[id(t)] = weakref.ref(t)
            except TypeError:   # a tensor that takes no weak reference: read in full each time
                pass
