"""The options of `mhc-torch capture` checked before anything runs: those that cannot change the
capture (a warning each) and values out of bounds (a refusal)."""
from __future__ import annotations


# The options that shape a preset's model and batch, and their defaults: a model file makes its own.
_SHAPE = {"batch": 1, "seq": 4096, "layers": None, "hc": 4}
# The most a count option may be, in the order checked (--seq and --hc as `mhc generate` bounds
# them); the help says them from here.
_MOST = {"steps": 10**6, "micro_batches": 10**6, "hc": 16, "seq": 1 << 22}
# The most tokens a step may hold (batch x seq): far beyond any GPU's step, and token counts times a
# vocabulary still fit the 64-bit sizes of tensors.
_MAX_TOKENS = 2**31


def _is_file(model: str) -> bool:
    return model.endswith(".py")


def _is_mhc(model: str) -> bool:
    return model.startswith("mhc") or model.endswith("mhc")


def _unused(model: str) -> list[str]:
    """The shape options that do nothing for `model`: all of them for a model file (make_batch()
    and build_model() decide), --hc for a model that is not an mHC transformer."""
    if _is_file(model):
        return list(_SHAPE)
    return [] if _is_mhc(model) else ["hc"]


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def _no_effect(a) -> list[str]:
    """The options given that cannot change this capture, each as one warning (as `mhc` warns:
    `--X has no effect: why`); fills the shape defaults."""
    out = []
    unused = [d for d in _unused(a.model) if getattr(a, d) is not None]
    if unused:
        why = ("builds its own model and batch (build_model(), make_batch())" if _is_file(a.model)
               else "is not an mHC transformer")
        verb = "has" if len(unused) == 1 else "have"
        out.append(f"{', '.join(map(_flag, unused))} {verb} no effect: {a.model} {why}")
    for d, default in _SHAPE.items():
        if getattr(a, d) is None:
            setattr(a, d, default)
    if a.forward_only:
        for d, default in (("zero_grad", "none"), ("optimizer", "adamw")):
            if getattr(a, d) != default:
                out.append(f"{_flag(d)} {getattr(a, d)} has no effect: a --forward-only step has no optimizer")
    if a.autocast == "none" and a.autocast_policy != "cuda":
        out.append(f"--autocast-policy {a.autocast_policy} has no effect with --autocast none")
    return out


def _check_options(a) -> str | None:
    """What is wrong with the (filled) options, as one line, or None."""
    for name, v in (("--steps", a.steps), ("--batch", a.batch), ("--seq", a.seq), ("--hc", a.hc),
                    ("--layers", a.layers if a.layers is not None else 1), ("--micro-batches", a.micro_batches)):
        if v < 1:
            return f"{name} must be at least 1 (got {v})"
    for d, hi in _MOST.items():
        if getattr(a, d) > hi:
            return f"{_flag(d)} must be at most {hi:,} (got {getattr(a, d):,})"
    if not _is_file(a.model):
        from .models import depth

        if a.layers is not None and a.layers > depth(a.model):
            return f"--layers {a.layers}: {a.model} takes at most {depth(a.model)}"
        if a.batch * a.seq > _MAX_TOKENS:
            return f"--batch {a.batch} x --seq {a.seq} is {a.batch * a.seq:,} tokens a step; at most {_MAX_TOKENS:,}"
    return None
