"""Memory settings a PyTorch user can turn on, as one JSON object (docs/torch.md, "Settings").

    {"checkpoint": {"modules": [FQN, ...], "policy": "full" | "save_matmuls" | "mhc"}
                   or a list of such groups (a policy for each),
     "offload":    {"mode": "sync" | "streamed", "modules": [FQN, ...] | null,
                    "min_bytes": INT, "max_fwd_stash": INT, "prefetch": INT},
     "optimizer":  {"impl": "foreach" | "fused" | "forloop", "state": "device" | "host"},
     "weights":    "fp32" | "bf16",
     "allocator":  "expandable_segments:True,max_split_size_mb:128",
     "reshard_after_forward": {FQN: true | false | RANKS, ...}}   (FSDP2's fully_shard modules)

Every key is optional (absent: as the model and optimizer were built). Module names are fully
qualified as the trace's `modules` table spells them: the root's class name, then the attribute
path (`GPT2LMHeadModel.transformer.h.3`). load_setting() checks the text and fills the defaults;
a problem is one SettingError line naming the key. The checked form has "checkpoint" as a list of
groups.
"""
from __future__ import annotations

import json
import os
import re

from . import json_input
from .number_grammar import printable

CHECKPOINT_POLICIES = ("full", "save_matmuls", "mhc")
OFFLOAD_MODES = ("sync", "streamed")
OPTIMIZER_IMPLS = ("foreach", "fused", "forloop")
OPTIMIZER_STATES = ("device", "host")
WEIGHTS = ("fp32", "bf16")
# torchtune's OffloadActivations defaults: the smallest storage moved, how many later saves a
# streamed offload keeps a device storage for; and how many saves ahead a streamed backward copies.
DEFAULT_MIN_BYTES = 1024
DEFAULT_MAX_FWD_STASH = 5
DEFAULT_PREFETCH = 2

# PYTORCH_CUDA_ALLOC_CONF options (PyTorch "CUDA memory management" notes) and how to read a value.
_ALLOCATOR_OPTIONS = {
    "expandable_segments": "bool", "max_split_size_mb": "int", "garbage_collection_threshold": "fraction",
    "roundup_power2_divisions": "divisions", "max_non_split_rounding_mb": "int", "backend": "backend",
    "release_lock_on_cudamalloc": "bool", "pinned_use_cuda_host_register": "bool",
    "pinned_num_register_threads": "int", "pinned_use_background_threads": "bool",
    # accepted by the caching model too, with no effect on where blocks go
    "graph_capture_record_stream_reuse": "any", "pinned_reserve_segment_size_mb": "any",
    "per_process_memory_fraction": "any",
}


class SettingError(ValueError):
    """A setting that cannot be applied: one line naming the key and the reason."""


def load_setting(source) -> dict:
    """A checked setting with its defaults filled, from a dict, a JSON text or a JSON file's path."""
    data, file = _read(source)
    try:
        return check_setting(data)
    except SettingError as e:
        raise _in_file(e, file) from None


def read_setting(source):
    """The setting as given (parsed JSON, not checked), from a dict, a JSON text or a file."""
    return _read(source)[0]


def _in_file(e: SettingError, file: str | None) -> SettingError:
    """`e` naming the file the setting was read from (`setting: FILE: ...`), as the file's other
    problems are said; as it is for a setting given as text."""
    text = str(e)
    if file is None or not text.startswith("setting: "):
        return e
    return SettingError(f"setting: {file}: {text[len('setting: '):]}")


def _read(source) -> tuple[object, str | None]:
    """The setting as given and the file it was read from (None: a dict or JSON text)."""
    if isinstance(source, dict):
        return source, None
    elif isinstance(source, (str, os.PathLike)):
        text = str(source)
        file = None
        if text.lstrip()[:1] in ("{", "[", '"') or not os.path.exists(text) and _is_json(text):
            where = "setting"
        else:
            file = text if text else "''"
            where = f"setting: {file}"
            try:
                text = json_input.read_file(text, "setting file").decode("utf-8")
            except OSError as e:
                raise SettingError(f"{where}: {e.strerror or e}") from None
            except UnicodeDecodeError:
                raise SettingError(f"{where}: not UTF-8 text (a JSON file was expected)") from None
            except ValueError as e:
                raise SettingError(f"{where}: {e}") from None
        try:
            data = json_input.loads(text)
        except ValueError as e:
            raise SettingError(f"{where}: {e}") from None
    else:
        raise SettingError(f"setting: expected a dict, JSON text or a file name, got {type(source).__name__}")
    return data, file


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
        return True
    except (ValueError, RecursionError):
        return False


def dumps(setting) -> str:
    """A setting as compact JSON (what a capture records in its meta, as given)."""
    return json.dumps(setting, separators=(",", ":"))


def check_setting(data) -> dict:
    if not isinstance(data, dict):
        raise SettingError(f"setting: expected a JSON object, got {_json_type(data)}")
    unknown = sorted(set(data) - {"checkpoint", "offload", "optimizer", "weights", "allocator", "reshard_after_forward"})
    if unknown:
        raise SettingError(f"setting: unknown key '{unknown[0]}'; valid: allocator, checkpoint, offload, optimizer, "
                           "reshard_after_forward, weights")
    out = {}
    if data.get("checkpoint") is not None:
        out["checkpoint"] = _checkpoint(data["checkpoint"])
    if data.get("offload") is not None:
        out["offload"] = _offload(data["offload"])
    if data.get("optimizer") is not None:
        out["optimizer"] = _optimizer(data["optimizer"])
    if data.get("weights") is not None:
        out["weights"] = _choice("weights", data["weights"], WEIGHTS)
    if data.get("allocator") is not None:
        out["allocator"] = _allocator(data["allocator"])
    if data.get("reshard_after_forward") is not None:
        out["reshard_after_forward"] = _reshard(data["reshard_after_forward"])
    return out


def _reshard(v) -> dict:
    """{FQN: true | false | ranks >= 2}: FSDP2's reshard_after_forward per fully_shard module."""
    if not isinstance(v, dict) or not v:
        raise SettingError(f"setting: reshard_after_forward: expected an object of module names, got {_json_type(v)}")
    for name, value in v.items():
        if not name or not (isinstance(value, bool) or (isinstance(value, int) and value >= 2)):
            raise SettingError(f"setting: reshard_after_forward.{name}: expected true, false or a number of ranks "
                               f">= 2, got {json.dumps(value)}")
        if not isinstance(value, bool) and value > 1 << 20:   # mhc's bound (advise/src/setting.cpp)
            _count(f"reshard_after_forward.{name}", value, "ranks", 2)
    return dict(v)


def _json_type(v) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
            int: "a number", float: "a number", type(None): "null"}.get(type(v), type(v).__name__)


def _object(key: str, v, allowed: tuple[str, ...]) -> dict:
    if not isinstance(v, dict):
        raise SettingError(f"setting: {key}: expected an object, got {_json_type(v)}")
    unknown = sorted(set(v) - set(allowed))
    if unknown:
        raise SettingError(f"setting: {key}: unknown key '{unknown[0]}'; valid: {', '.join(allowed)}")
    return v


def _choice(key: str, v, choices: tuple[str, ...]) -> str:
    if v not in choices:
        raise SettingError(f"setting: {key}: {json.dumps(v)} is not one of {', '.join(choices)}")
    return v


def _modules(key: str, v, allow_null: bool) -> list[str] | None:
    if v is None and allow_null:
        return None
    if not isinstance(v, list) or not v or not all(isinstance(m, str) and m for m in v):
        raise SettingError(f"setting: {key}: expected a non-empty array of module names"
                           + (" or null" if allow_null else ""))
    return list(dict.fromkeys(v))  # in the given order, each once


def _count(key: str, v, unit: str, least: int = 0, most: int = 1 << 20) -> int:
    """A whole number in [least, most]: mhc's bounds of the field (advise/src/setting.cpp), so
    that a setting mhc-torch captures with, mhc reads (10**30 saves was taken here, refused there)."""
    if isinstance(v, bool) or not isinstance(v, int) or v < least:
        raise SettingError(f"setting: {key}: expected a whole number of {unit} >= {least}, got {json.dumps(v)}")
    if v > most:
        shown = json.dumps(v) if len(str(v)) <= 40 else f"a number of {len(str(v))} digits"
        raise SettingError(f"setting: {key}: expected at most {most:,} {unit} (2^{most.bit_length() - 1}), got {shown}")
    return v


def _checkpoint(v) -> list[dict]:
    groups = v if isinstance(v, list) else [v]
    if not groups:
        raise SettingError("setting: checkpoint: expected an object or a non-empty array of them")
    out, seen = [], set()
    for i, g in enumerate(groups):
        key = f"checkpoint[{i}]" if isinstance(v, list) else "checkpoint"
        g = _object(key, g, ("modules", "policy"))
        if "modules" not in g:
            raise SettingError(f"setting: {key}: 'modules' is missing (the modules to recompute)")
        modules = _modules(f"{key}.modules", g["modules"], False)
        twice = next((m for m in modules if m in seen), None)
        if twice is not None:
            raise SettingError(f"setting: {key}.modules: '{twice}' is in an earlier group too")
        seen.update(modules)
        out.append({"modules": modules, "policy": _choice(f"{key}.policy", g.get("policy", "full"), CHECKPOINT_POLICIES)})
    return out


def _offload(v) -> dict:
    v = _object("offload", v, ("mode", "modules", "min_bytes", "max_fwd_stash", "prefetch"))
    mode = _choice("offload.mode", v.get("mode", "sync"), OFFLOAD_MODES)
    out = {"mode": mode, "modules": _modules("offload.modules", v.get("modules"), True),
           "min_bytes": _count("offload.min_bytes", v.get("min_bytes", DEFAULT_MIN_BYTES), "bytes", most=1 << 56)}
    if mode == "sync":
        for key in ("max_fwd_stash", "prefetch"):
            if v.get(key):
                raise SettingError(f"setting: offload.{key}: only a streamed offload has one (mode is sync)")
        out.update(max_fwd_stash=0, prefetch=0)
        return out
    out["max_fwd_stash"] = _count("offload.max_fwd_stash", v.get("max_fwd_stash", DEFAULT_MAX_FWD_STASH), "saves", 1)
    out["prefetch"] = _count("offload.prefetch", v.get("prefetch", DEFAULT_PREFETCH), "saves")
    return out


def _optimizer(v) -> dict:
    v = _object("optimizer", v, ("impl", "state"))
    out = {"state": _choice("optimizer.state", v.get("state", "device"), OPTIMIZER_STATES)}
    if v.get("impl") is not None:
        out["impl"] = _choice("optimizer.impl", v["impl"], OPTIMIZER_IMPLS)
    return out


def _allocator(v) -> str:
    if not isinstance(v, str) or not v.strip():
        raise SettingError("setting: allocator: expected a PYTORCH_CUDA_ALLOC_CONF string, "
                           "e.g. \"expandable_segments:True\"")
    why = allocator_conf_problem(v)
    if why:
        raise SettingError(f"setting: allocator: {why}")
    return v


def _options(text: str) -> list[str] | None:
    """The options of PYTORCH_CUDA_ALLOC_CONF text: split at commas outside brackets (a roundup list
    holds commas); None when the brackets do not balance."""
    out, cur, depth = [], "", 0
    for c in text:
        depth += (c == "[") - (c == "]")
        if c == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += c
    out.append(cur)
    return out if depth == 0 else None


def _whole(value: str) -> int | None:
    """A whole number of ASCII digits (at most 18) as the caching model reads one, else None (Python's
    int() reads '٣٣'; '²' passed str.isdigit() and then failed int() with a traceback)."""
    return int(value) if 0 < len(value) <= 18 and all(c in "0123456789" for c in value) else None


def _power_of_2(value: str) -> bool:
    """A number of divisions: 0, or a power of 2 up to 2^20."""
    n = _whole(value)
    return n is not None and n & (n - 1) == 0 and n <= 1 << 20


def _divisions(value: str) -> bool:
    """roundup_power2_divisions: one power of 2 (or 0) for every size, or [MiB:divisions,...,>:divisions]."""
    if not value.startswith("["):
        return _power_of_2(value)
    if not value.endswith("]"):
        return False
    for item in value[1:-1].split(","):
        mib, sep, divisions = (s.strip(" \t") for s in item.partition(":"))
        n = _whole(mib)
        if not sep or not _power_of_2(divisions) or (mib != ">" and not (n and n & (n - 1) == 0)):
            return False
    return True


_DECIMAL = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_HEX = re.compile(r"[+-]?0[xX]([0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)([pP][+-]?\d+)?")


def _is_fraction(text: str) -> bool:
    """A number strictly between 0 and 1 in the grammar of C's strtod, as the model reads it ('0.5_0'
    is no number there; Python's float() reads it as 0.5)."""
    if _DECIMAL.fullmatch(text):
        x = float(text)
    elif _HEX.fullmatch(text):
        x = float.fromhex(text)
    else:
        return False
    return 0.0 < x < 1.0


def allocator_conf_problem(conf: str) -> str | None:
    """Why `mhc` cannot read PYTORCH_CUDA_ALLOC_CONF text `conf` as the caching model's settings, in one
    line, or None. The rule is sim/src/caching_allocator.cpp's parse_allocator_conf, which `mhc check`
    holds a trace's meta allocator.conf to: a capture recorded settings it could not read (a setting's
    "max_split_size_mb:٣٣", or the same in the environment), and simulate and advise refused the trace."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in conf):
        return f"'{printable(conf)}': holds a control character"
    options = _options(conf)
    if options is None:
        return f"'{conf}': unbalanced brackets"
    for part in options:
        part = part.strip(" \t")
        if not part:
            continue
        key, sep, value = (s.strip(" \t") for s in part.partition(":"))
        if not sep:
            return f"'{part}': expected key:value (PYTORCH_CUDA_ALLOC_CONF syntax)"
        kind = _ALLOCATOR_OPTIONS.get(key)
        if kind is None:
            return f"unknown option '{key}'; valid: {', '.join(sorted(_ALLOCATOR_OPTIONS))}"
        if not value:
            return f"option '{key}' has no value (write {key}:VALUE)"
        ok = {"bool": value in ("True", "False"), "int": _whole(value) is not None, "fraction": _is_fraction(value),
              "backend": value in ("native", "cudaMallocAsync"), "divisions": _divisions(value), "any": True}[kind]
        if not ok:
            want = {"bool": "True or False", "int": "a whole number", "fraction": "a number between 0 and 1",
                    "backend": "native or cudaMallocAsync",
                    "divisions": "a power of 2 (or 0), or a list [MiB:divisions,...,>:divisions] of them"}[kind]
            return f"{key}:{value}: expected {want}"
        if kind == "backend" and value == "cudaMallocAsync":
            return f"{key}:{value}: not the caching allocator mhc models (the trace's settings could not be simulated)"
        if key in ("max_split_size_mb", "max_non_split_rounding_mb"):
            # as the simulator's model takes them (sim/src/caching_allocator.cpp, parseMaxSplitSize):
            # MiB, at least kLargeBuffer (20 MiB), as torch 2.15 (earlier releases refused 20 too)
            if int(value) < 20:
                return f"{key}:{value}: too small: it must be at least 20 (MiB)"
            if int(value) > 1 << 30:
                return f"{key}:{value}: more than 2^50 bytes"
    return None
