"""What a capture records for memory settings (docs/trace-format.md, "modules, kernel_info,
saved_tensors"): the modules that ran, the storages autograd saves for the backward and the op
that saved each, forward ops re-run in the backward (checkpointing: phase recompute), and host
memory (device -1) with the copies to and from it, which settings tell through mhc_torch.placement.

Mixed into recording.Recording; the methods here read and extend its allocations and kernels.
"""
from __future__ import annotations

import json
import weakref
from typing import Callable

import torch
from torch._C._functorch import is_functorch_wrapped_tensor

from . import checkpointing, placement, store
from .op_schema import _dense_parts

_HOST_CATEGORY = {placement.ACTIVATION: store.ACTIVATION, placement.OPTIMIZER: store.OPTIMIZER,
                  placement.GRAD: store.GRAD, placement.PARAM: store.PARAM, placement.WORKSPACE: store.WORKSPACE}
_COPY_OPS = {"aten::copy_", "aten::_copy_from"}
HOST = -1  # allocations.device of host memory


def _own_output(t: torch.Tensor) -> bool:
    """Whether autograd saves t as an output of the op that ran last: autograd saves an op's inputs
    before the op runs and its outputs after, and numbers its nodes as it makes them, so a tensor
    whose own node is the newest one is an output of that op, anything else an input of the next."""
    return t.grad_fn is not None and t.grad_fn._sequence_nr() == torch._C._autograd._get_sequence_nr() - 1


class SettingsRecording:
    """Modules, saved tensors, recompute and host memory, for Recording (see the module doc)."""

    def init_tables(self) -> None:
        self.copies: list[store.Copy] = []
        self.saves: list[tuple[int, int, bool, str]] = []  # (allocation, kernels so far, output?, module)
        self.unpacks: dict[tuple[int, int], int] = {}  # (allocation, graph task) -> the kernel after its first unpack
        self.save_unpacks: dict[int, int] = {}  # index into saves -> the kernel after that save's first unpack
        self._save_of: dict[int, tuple] = {}   # id(packed tensor) -> (a weak reference to it, its saves)
        self.module_types: dict[str, str] = {}  # fqn -> class name, in the order they first ran
        self.torch_func_depth = 0   # torch.func transforms running with the capture's hooks set aside
        self.torch_func_modules: list[str] = []   # the outermost modules that ran inside one
        self.jvp_depth = 0   # torch.func's jvp and jacfwd running (the capture's hooks kept)
        self.jvp_modules: list[str] = []   # the outermost modules that ran inside one
        self.generate_lengths: list[int | None] = []   # each generate() call's max_length (generation.py)
        self.model_cache_updates: list[list] = []   # [model, first kernel, last kernel] (model_cache.py)
        self.kept_cache_callers: set[str] = set()   # modules updating a cache the setting keeps (model_cache.py)
        self.active: list[str] = []  # modules running (forward, or backward), innermost last
        self.call_starts: dict[str, list[int]] = {}  # fqn -> the kernel id each forward call starts at
        self.call_args: list[list] = []   # [fqn, the call's first kernel id, [allocation ids]] (args_meta)
        self.name_of: Callable[[torch.nn.Module], str | None] = lambda m: None
        self.callee_names = weakref.WeakKeyDictionary()   # module -> its name under its caller
        self.callee_prefixes: dict[str, str] = {}   # ModTracker's name of such a module -> its name here
        self.made_in: dict[str, str] = {}   # such a module's name here -> the registered module that made it
        # the model's own modules by ModTracker's name (set_model): another module named as one of
        # them is a copy outside the model (a frozen reference or EMA teacher made with deepcopy)
        self.model_modules: dict[str, int] = {}
        self.side_free = 0  # when the copy stream is next free (ns)
        self.host_live = self.host_peak = 0
        self.host_seen = False  # an allocation was recorded as host memory (else no op is host work)
        self.own_ops = 0  # > 0 while the capture's own hooks run ops: not the model's, not recorded

    # Host memory ----------------------------------------------------------------------------
    def host_category(self, storage, new: bool) -> int | None:
        """The category of an untyped storage if it is host memory (placement.mark_host said so, or
        an op made it inside a placement.on_host region), else None."""
        what = placement.storage_host_kind(storage) or (placement.host_region() if new else None)
        return None if what is None else _HOST_CATEGORY.get(what, store.OTHER)

    def on_host(self, t: torch.Tensor) -> bool:
        """Whether t's storage is host memory (recorded so, or marked so)."""
        s = self.storages.get(id(t.untyped_storage()))
        return s.alloc.device == HOST if s is not None else self.host_category(t.untyped_storage(), False) is not None

    def to_host(self, alloc: store.Allocation, category: int) -> None:
        alloc.device = HOST
        self.host_seen = True
        alloc.category = category
        self.host_live += alloc.bytes
        self.host_peak = max(self.host_peak, self.host_live)

    def route_host_op(self, name: str, reads, mutated, tracked) -> bool:
        """True when the op is not a GPU kernel: work on host tensors only (an optimizer step on
        the host), or a copy between host and device memory (recorded in `copies`). `tracked`
        are the records of its storages (None for an empty one)."""
        records = [s for s in tracked if s is not None]
        host = [s.alloc.device == HOST for s in records]
        if records and all(host):
            # Host work has no kernel to time; a nanosecond each keeps its allocations and frees
            # in order (else a temporary made and freed within one op's instant counts alone:
            # foreach AdamW's square roots, all held at once, did).
            self.t += 1
            return True
        if name in _COPY_OPS and any(host) and mutated and reads:
            dst = self.storages[id(mutated[0].untyped_storage())].alloc
            kind = store.D2H if dst.device == HOST else store.H2D
            self.record_copy(kind, mutated[0].numel() * mutated[0].element_size())
            return True
        return False

    def record_copy(self, kind: int, nbytes: int) -> None:
        """A copy over the host link: on the copy stream (1) inside placement.side_stream(), where
        it overlaps the compute; else on the compute stream, which it holds up."""
        dur = max(1, int(round((nbytes / self.spec.host_link_bw + self.spec.launch_overhead_s) * 1e9)))
        if placement.side_stream_active():
            start = max(self.t, self.side_free)
            self.side_free = start + dur
            stream = 1
        else:
            start, stream = self.t, 0
            self.t = start + dur
        self.copies.append(store.Copy(id=len(self.copies) + 1, kind=kind, bytes=nbytes, t_start=start,
                                      t_end=start + dur, stream=stream))

    # Phases -----------------------------------------------------------------------------------
    def phase_code(self) -> int:
        """The phase of the op running now: a forward op re-run by the autograd engine with
        autograd recording (checkpointing's recompute) is phase recompute; a backward that records
        a graph of its own (create_graph=True) is the backward it is."""
        if self.phase == "backward" and torch.is_grad_enabled() and torch._C._current_graph_task_id() != -1 \
                and checkpointing.recomputing_in_backward():
            return store.RECOMPUTE
        return {"forward": store.FORWARD, "backward": store.BACKWARD,
                "optimizer": store.OPTIMIZER_PHASE}.get(self.phase, store.OTHER_PHASE)

    # Saved tensors ----------------------------------------------------------------------------
    def on_saved(self, t: torch.Tensor, made_by_last_op: bool | None = None) -> None:
        """A pack hook's tensor: an output of the op that ran last or an input of the op that runs
        next (_own_output), unless the caller knows (a user's pack hook made it: its last op's)."""
        is_output = _own_output(t) if made_by_last_op is None else made_by_last_op
        for part in _dense_parts(t):   # a sparse tensor (torch.sparse.mm's adjacency): its indices and values
            s = self.storages.get(id(part.untyped_storage()))
            if s is not None:
                self.saves.append((s.alloc.id, len(self.kernels), is_output, self.module_of()))

    def saved_pairs(self) -> list[tuple[int, int, int]]:
        """(allocation, kernel, packs) of the saves: an output to the kernel that made it (which ran
        in the module saving it: nothing runs between an op and the saving of its outputs), an input
        to the next kernel if it runs in the saving module or inside it (else the last one before);
        packs counts an op's saves of one storage (views of it: q, k and v of one projection)."""
        packs: dict[tuple[int, int], int] = {}
        for alloc, kernel in self._saves_by_kernel():
            packs[(alloc, kernel)] = packs.get((alloc, kernel), 0) + 1
        return sorted((a, k, n) for (a, k), n in packs.items())

    def _saves_by_kernel(self) -> list[tuple[int, int]]:
        """(allocation, kernel id) of each save, in the order autograd packed them."""
        return [(alloc, kernel) for _, alloc, kernel in self._saves_indexed()]

    def _saves_indexed(self) -> list[tuple[int, int, int]]:
        """(index into saves, allocation, kernel id) of each save credited to a kernel, in order."""
        out = []
        for i, (alloc, count, is_output, module) in enumerate(self.saves):
            last = self.kernels[count - 1] if count > 0 else None
            nxt = self.kernels[count] if count < len(self.kernels) else None
            if is_output and last is not None and last.module == module:
                kernel = last
            elif nxt is not None and (nxt.module == module or nxt.module.startswith(module + ".")):
                kernel = nxt
            elif last is not None:
                kernel = last
            else:
                continue
            out.append((i, alloc, kernel.id))
        return out

    def pack_meta(self) -> dict[str, str]:
        """Meta capture.pack_order: [[allocation id, kernel id], ...], every save in the order
        autograd packed it (an offload's hook numbers the saves so: its stash and prefetch count
        them). One op's saves are in the order of its formula's saved variables, which is not the
        order its backward node first unpacks the storages in when another node unpacked one of
        them before (a weight, an embedding every block reads)."""
        return {"capture.pack_order": json.dumps([list(r) for r in self._saves_by_kernel()], separators=(",", ":"))}

    def saved_hooks(self):
        """The capture's own saved-tensor hooks for the forward: they record and keep the tensor,
        and note when the backward first unpacks each storage (on_unpacked). They keep each saved
        tensor as t.detach(), its storage without the tensor object (PyTorch's advice for a pack
        hook; SavedVariable keeps an output's data without its node). Keeping an output itself made
        its node hold the packed t, which holds the node, a reference cycle no collection breaks: a
        graph dropped without a backward (a GAN's `fake = G(z).detach()`) kept every storage it
        saved, and checkpoint's inputs, to the step's end, where PyTorch frees them at the drop.
        Keeping an input itself kept its tensor object alive, which then did not die where the
        model's code dropped it (frame_holds.py watches a forward's returned tensors for that).
        The detach is the capture's op, not recorded."""
        def pack(t):
            first = len(self.saves)
            self.on_saved(t)
            self.own_ops += 1
            try:
                kept = t.detach()
            finally:
                self.own_ops -= 1
            self.note_packed(kept, range(first, len(self.saves)))
            return kept

        def unpack(t):
            self.on_unpacked(t, self.packed_saves(t))
            return t
        pack.mhc_capture_hook = True   # torch.func's transforms set it aside (capturing._functorch_beside_capture)
        return torch.autograd.graph.saved_tensors_hooks(pack, unpack)

    def note_packed(self, packed: torch.Tensor, saves) -> None:
        """`packed` is what autograd holds for the saves numbered `saves` (indices into saves): a
        pack hook's return. One object returned for several saves (a user's hook handing back the
        tensor it was given, a weight every op saves) does not tell its unpacks apart: none of
        them is noted, and each takes its storage's first unpack (capture.unpacks)."""
        known = self._save_of.get(id(packed))
        if known is not None and known[0]() is packed:
            saves = ()
        self._save_of[id(packed)] = (weakref.ref(packed), saves)

    def packed_saves(self, packed: torch.Tensor) -> tuple | None:
        """What note_packed noted for `packed` (its weak reference and its saves), or None."""
        return self._save_of.get(id(packed))

    def on_unpacked(self, t: torch.Tensor, saves: tuple | None = None) -> None:
        """A backward node unpacks every saved tensor it holds before its first kernel runs, not
        where that kernel reads it (a matmul's backward unpacks its input for the weight gradient,
        its second kernel): an offloaded storage is brought back there. Recorded per backward
        (graph task) as the id of the kernel that runs next; per save too, where the capture's own
        pack hook made it (`saves`: the packed tensor's weak reference and its indices into saves):
        an earlier op's save of a storage a later op saved as well (F.normalize's norm and
        division, both saving the input) is unpacked by its own node, later."""
        task = torch._C._current_graph_task_id()
        if saves is not None and task != -1 and saves[0]() is t:
            for i in saves[1]:
                self.save_unpacks.setdefault(i, len(self.kernels) + 1)
        for part in _dense_parts(t) if task != -1 else ():
            s = self.storages.get(id(part.untyped_storage()))
            if s is not None:
                self.unpacks.setdefault((s.alloc.id, task), len(self.kernels) + 1)

    def torch_func_meta(self) -> dict[str, str]:
        """Meta capture.torch_func_modules: the outermost modules whose forward ran inside torch.func's
        grad, vjp, jacrev or hessian (capturing._functorch_beside_capture), which refuse the
        saved-tensor hooks that checkpointing and offloading are; absent when none ran there. Meta
        capture.generate: the max_length of each Hugging Face generate() call (generation.py); meta
        capture.model_cache_updates: the kernels of each update of a cache a model made itself; meta
        capture.kept_cache_callers: the modules whose forward updates, with autograd recording, a
        cache the setting does not turn off (a forward given use_cache=True)."""
        out = {"capture.torch_func_modules": json.dumps(self.torch_func_modules)} if self.torch_func_modules else {}
        if self.jvp_modules:   # the outermost modules run inside torch.func's jvp or jacfwd
            out["capture.jvp_modules"] = json.dumps(self.jvp_modules)
        if self.generate_lengths:   # each generate() call's length limit, which its fake rollout ran to
            out["capture.generate"] = json.dumps(self.generate_lengths)
        if self.model_cache_updates:   # the kernels of the caches models made themselves (model_cache.py)
            out["capture.model_cache_updates"] = json.dumps(self.model_cache_updates, separators=(",", ":"))
        if self.kept_cache_callers:   # the modules whose forward updates a cache checkpointing leaves on
            out["capture.kept_cache_callers"] = json.dumps(sorted(self.kept_cache_callers))
        return out

    def unpack_meta(self) -> dict[str, str]:
        """Meta capture.unpacks: [[allocation id, kernel id], ...], each storage's first unpack in
        each backward (a kernel that ran: an unpack after the last kernel is left out), in the order
        of the unpacks: a node unpacks its saved tensors in the order of its formula, which an
        offload's copies back follow (the dict keeps that order)."""
        rows = list(dict.fromkeys((a, k) for (a, _), k in self.unpacks.items() if k <= len(self.kernels)))
        out = {"capture.unpacks": json.dumps([list(r) for r in rows], separators=(",", ":"))}
        # capture.save_unpacks: beside each row of capture.pack_order, the kernel that ran next
        # after that save's first unpack (0: none, or past the last kernel)
        if self.save_unpacks:
            kernels = len(self.kernels)
            after = [self.save_unpacks.get(i, 0) for i, _, _ in self._saves_indexed()]
            out["capture.save_unpacks"] = json.dumps([k if k <= kernels else 0 for k in after], separators=(",", ":"))
        return out

    # Modules ----------------------------------------------------------------------------------
    def track_modules(self, tracker) -> None:
        """Follows modules as a ModTracker sees them enter and leave, forward and backward.
        The innermost running module is the one entered last: a module called from inside a
        sibling's forward (an mHC connection running its sublayer) is inside it while it runs."""
        self.name_of = tracker.get_known_fqn
        tracker.register_user_hooks(pre_fw_hook=lambda m, args: self.on_module(m, True, True, args),
                                    post_fw_hook=lambda m, _, __: self.on_module(m, False, True),
                                    pre_bw_hook=lambda m, _: self.on_module(m, True, False),
                                    post_bw_hook=lambda m, _: self.on_module(m, False, False))

    def set_model(self, model: torch.nn.Module) -> None:
        """The model whose modules the trace names (after ModTracker has named them)."""
        self.model_modules = {n: id(m) for m in model.modules() if (n := self.name_of(m))}
        self.model_root = self.name_of(model)

    def on_module(self, module: torch.nn.Module | None, entering: bool, forward: bool = True, args=()) -> None:
        if entering and forward:
            # a backward the step ran itself (`scaler.scale(loss).backward()`) ends at the next op
            # outside the engine, which drops the modules still open from it: the next micro-batch's
            # model call, entered before that op, was dropped with them, and its own ops (nanoGPT's
            # loss) ran outside every module, outside an offload's scope in the prediction
            self._follow_autograd()
        name = self.name_of(module) if module is not None else None
        if not name:
            return
        # A copy of the model outside it (DPO's reference model, DINO's EMA teacher: copy.deepcopy
        # of the model, called beside it) is named by ModTracker as the model is: its kernels were
        # recorded in the model's own layers (a layer "called twice a pass", its no_grad forward
        # taken for the trained one's). Its modules are none of the model's: not entered, its
        # kernels are its caller's (none: outside every module), as for any code outside the model.
        if self.model_modules.get(name, id(module)) != id(module):
            return
        if entering and forward:
            name = self._called_name(module, name)
        else:
            name = self.callee_names.get(module, name)
        if entering and forward and self.torch_func_depth and not any(a in self.torch_func_modules for a in self.active):
            self.torch_func_modules.append(name)   # the outermost module run inside torch.func's grad
        if entering and forward and self.jvp_depth and not any(a in self.jvp_modules for a in self.active):
            self.jvp_modules.append(name)   # the outermost module run inside torch.func's jvp
        if entering:
            self.active.append(name)
            starts = self.call_starts.setdefault(name, []) if self.phase == "forward" else None
            if starts is not None and (not starts or starts[-1] != len(self.kernels) + 1):
                starts.append(len(self.kernels) + 1)  # a call entered twice (a checkpoint's wrapper too): once
                self._note_args(name, args)
            self.module_types.setdefault(name, type(module).__name__)
        elif name in self.active:
            del self.active[len(self.active) - 1 - self.active[::-1].index(name)]

    def _called_name(self, module: torch.nn.Module, name: str) -> str:
        """The name a module is recorded under when its forward starts. A module the model does
        not register (a loss built inside the model's forward, as T5 and BART do; an activation
        made on each call) is one ModTracker names by its class alone, as if it were a model of its
        own: it runs inside the module that calls it (a saved_tensors_hooks or a checkpoint around
        that module covers its ops), so it is recorded as a child of its caller, "Caller.Class".
        Its own children follow it; a module called with nothing running keeps its name."""
        caller = self.active[-1] if self.active else ""
        outermost = next((n for n in self.active if n), "")
        if not caller or name.split(".")[0] == outermost.split(".")[0]:
            self.callee_names.pop(module, None)
            return name
        parts = name.split(".")
        for i in range(len(parts) - 1, 0, -1):   # a child of such a module, as ModTracker names it
            under = self.callee_prefixes.get(".".join(parts[:i]))
            if under is not None and under in self.active:
                called = under + "." + ".".join(parts[i:])
                break
        else:
            called = f"{caller}.{name}"
            self.callee_prefixes[name] = called
        self.callee_names[module] = called
        # the model's own module whose forward makes it: what a user's code can name instead
        self.made_in[called] = self.made_in.get(caller, caller)
        return called

    def unregistered_meta(self) -> dict[str, str]:
        """Meta capture.unregistered_modules: {recorded name: the registered module whose forward
        made it}, for the modules recorded as "Caller.Class" (model.get_submodule cannot reach
        them: `mhc advise` names the registered module instead)."""
        made = dict(sorted(self.made_in.items()))
        return {"capture.unregistered_modules": json.dumps(made, separators=(",", ":"))} if made else {}

    def _note_args(self, name: str, args) -> None:
        """The storages of the tensors a forward call is passed positionally, in order: what
        torch.utils.checkpoint packs through saved-tensor hooks around the call (its save_inputs;
        keyword arguments it keeps by reference)."""
        ids = []
        for a in args if isinstance(args, tuple) else ():
            # A torch.func transform's wrapper (vmap, grad) has no storage of its own to name; the
            # transforms run without checkpoint's hooks anyway.
            # A sparse COO tensor (torch.sparse.mm's adjacency) has no storage: its indices' and values' are its own.
            tracked = isinstance(a, torch.Tensor) and not is_functorch_wrapped_tensor(a)
            for part in _dense_parts(a) if tracked else ():
                s = self.storages.get(id(part.untyped_storage()))
                if s is not None:
                    ids.append(s.alloc.id)
        if ids:
            self.call_args.append([name, len(self.kernels) + 1, ids])

    def args_meta(self) -> dict[str, str]:
        """Meta capture.call_args: [[module, kernel id, [allocation id, ...]], ...], each forward
        call's positional tensor arguments (those the capture tracks), by the kernel the call starts at."""
        rows = [r for r in self.call_args if r[1] <= len(self.kernels)]
        return {"capture.call_args": json.dumps(rows, separators=(",", ":"))} if rows else {}

    def calls_meta(self) -> dict[str, str]:
        """Meta capture.module_calls: {module: [kernel id, ...]}, the kernel each forward call
        starts at, for the modules called more often than the model (a layer whose weights are
        shared, called again and again: ALBERT's one layer, 12 calls a pass). Calls one after
        another run kernels of one module without a break, which only these ids tell apart: a
        checkpoint of such a module is one checkpoint per call (mhc advise's checkpoint transform)."""
        # the model's own calls, once a pass; where the step never calls the model itself (a GAN's
        # netG and netD), the module entered first. Not simply the first: a weight_norm'd layer's
        # parametrization runs as a module wherever its weight is read (DINO's head read outside
        # the forward), before the model and as often.
        root = self.call_starts.get(getattr(self, "model_root", None))
        passes = len(root) if root else len(next(iter(self.call_starts.values()), ()))
        many = {n: [k for k in ks if k <= len(self.kernels)] for n, ks in self.call_starts.items() if len(ks) > passes}
        return {"capture.module_calls": json.dumps(many, separators=(",", ":"))} if many else {}

    def module_of(self) -> str:
        """The innermost module running now ("" outside every module)."""
        return self.active[-1] if self.active else ""

    def module_records(self, model: torch.nn.Module) -> list[store.Module]:
        """Every module that ran or ran an op, with its ancestors, parents before children."""
        names = dict.fromkeys(list(self.module_types) + [k.module for k in self.kernels if k.module])
        order = {}
        for name in names:
            parts = name.split(".")
            for i in range(1, len(parts) + 1):
                order.setdefault(".".join(parts[:i]), len(order))
        # The model's root first: mhc advise takes the first root as the model's. Another model
        # the step runs before it (a distillation teacher, a reward model: not copies of the
        # model, which on_module leaves out) was taken for it, and no setting of the model's
        # modules changed the prediction.
        root = getattr(self, "model_root", None)
        out = []
        for name in sorted(order, key=lambda n: (n.count("."), n.partition(".")[0] != root, order[n])):
            parent = name.rpartition(".")[0]
            kind = self.module_types.get(name)
            if kind is None:
                try:
                    kind = type(model.get_submodule(name.partition(".")[2])).__name__ if "." in name else type(model).__name__
                except AttributeError:
                    kind = ""
            out.append(store.Module(name=name, parent=parent, type=kind))
        return out
