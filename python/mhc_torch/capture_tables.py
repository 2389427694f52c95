"""What a capture records for memory settings (docs/trace-format.md, "modules, kernel_info,
saved_tensors"): the modules that ran, the storages autograd saves for the backward and the op
that saved each, forward ops re-run in the backward (checkpointing: phase recompute), and host
memory (device -1) with the copies to and from it, which settings tell through mhc_torch.placement.

Mixed into capturing.Recording; the methods here read and extend its allocations and kernels.
"""
from __future__ import annotations

import torch

from . import placement, store

_HOST_CATEGORY = {placement.ACTIVATION: store.ACTIVATION, placement.OPTIMIZER: store.OPTIMIZER,
                  placement.GRAD: store.GRAD, placement.PARAM: store.PARAM}
_COPY_OPS = {"aten::copy_", "aten::_copy_from"}
HOST = -1  # allocations.device of host memory


class SettingsRecording:
    """Modules, saved tensors, recompute and host memory, for Recording (see the module doc)."""

    def init_tables(self) -> None:
        self.copies: list[store.Copy] = []
        self.saves: list[tuple[int, int, bool, str]] = []  # (allocation, kernels so far, output?, module)
        self.module_types: dict[str, str] = {}  # fqn -> class name, in the order they first ran
        self.side_free = 0  # when the copy stream is next free (ns)
        self.host_live = self.host_peak = 0

    # Host memory ----------------------------------------------------------------------------
    def host_kind(self, t: torch.Tensor, new: bool) -> str | None:
        """What t's storage holds if it is host memory: marked so, or made inside an on_host region."""
        return placement.host_kind(t) or (placement.host_region() if new else None)

    def to_host(self, alloc: store.Allocation, what: str) -> None:
        alloc.device = HOST
        alloc.category = _HOST_CATEGORY.get(what, store.OTHER)
        self.host_live += alloc.bytes
        self.host_peak = max(self.host_peak, self.host_live)

    def route_host_op(self, name: str, label: str, reads, mutated, new_outs) -> bool:
        """True when the op is not a GPU kernel: work on host tensors only (an optimizer step on
        the host), or a copy between host and device memory (recorded in `copies`)."""
        ins = [self.track(t, store.OTHER, f"untracked input of {name}") for t in reads + mutated]
        outs = [self.track(t, None, label) for t in new_outs]
        records = [s for s in ins + outs if s is not None]
        host = [s.alloc.device == HOST for s in records]
        if records and all(host):
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
        autograd recording (checkpointing's recompute) is phase recompute."""
        if self.phase == "backward" and torch.is_grad_enabled() and torch._C._current_graph_task_id() != -1:
            return store.RECOMPUTE
        return {"forward": store.FORWARD, "backward": store.BACKWARD,
                "optimizer": store.OPTIMIZER_PHASE}.get(self.phase, store.OTHER_PHASE)

    # Saved tensors ----------------------------------------------------------------------------
    def on_saved(self, t: torch.Tensor) -> None:
        """A pack hook's tensor. Autograd saves an op's inputs before the op runs and its outputs
        after, and numbers its nodes as it makes them: a tensor whose own node is the newest one is
        an output of the op that ran last, anything else an input of the op that runs next."""
        s = self.storages.get(id(t.untyped_storage()))
        if s is None:
            return
        newest = torch._C._autograd._get_sequence_nr() - 1
        is_output = t.grad_fn is not None and t.grad_fn._sequence_nr() == newest
        self.saves.append((s.alloc.id, len(self.kernels), is_output, self.module_of()))

    def saved_pairs(self) -> list[tuple[int, int]]:
        """(allocation, kernel) of every save: an output to the kernel that made it, an input to
        the next kernel in the same module (else the last one before it)."""
        pairs = set()
        for alloc, count, is_output, module in self.saves:
            if is_output or count >= len(self.kernels) or self.kernels[count].module != module:
                if count > 0:
                    pairs.add((alloc, self.kernels[count - 1].id))
            else:
                pairs.add((alloc, self.kernels[count].id))
        return sorted(pairs)

    def saved_hooks(self):
        """The capture's own saved-tensor hooks for the forward: they record and keep the tensor."""
        def pack(t):
            self.on_saved(t)
            return t
        return torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t)

    # Modules ----------------------------------------------------------------------------------
    def module_ran(self, name: str | None, module: torch.nn.Module) -> None:
        if name and name not in self.module_types:
            self.module_types[name] = type(module).__name__

    def module_records(self, model: torch.nn.Module) -> list[store.Module]:
        """Every module that ran or ran an op, with its ancestors, parents before children."""
        names = dict.fromkeys(list(self.module_types) + [k.module for k in self.kernels if k.module])
        order = {}
        for name in names:
            parts = name.split(".")
            for i in range(1, len(parts) + 1):
                order.setdefault(".".join(parts[:i]), len(order))
        out = []
        for name in sorted(order, key=lambda n: (n.count("."), order[n])):
            parent = name.rpartition(".")[0]
            kind = self.module_types.get(name)
            if kind is None:
                try:
                    kind = type(model.get_submodule(name.partition(".")[2])).__name__ if "." in name else type(model).__name__
                except AttributeError:
                    kind = ""
            out.append(store.Module(name=name, parent=parent, type=kind))
        return out
