"""A capture's recipe: the model and options of its step, kept in the trace's meta capture.recipe,
and read back (JSON text, a JSON file or a trace) as the command-line arguments it stands for."""
from __future__ import annotations

import argparse
import os
import sys

from . import file_bytes, json_input
from .cli_io import _say
from .cli_options import _unused
from .json_input import not_a_regular_file
from .number_grammar import whole


# Options that say where the trace goes or what is applied to the step, not what the step is.
_NOT_RECIPE = {"help", "out", "force", "setting", "recipe", "cmd", "kernel_times", "max_input_size"}


def _recipe(a, parser: argparse.ArgumentParser) -> dict:
    """What `mhc-torch capture` needs to run the same capture again: the model (a preset or the
    absolute path of FILE.py) and every option of the step."""
    recipe = {"model": os.path.abspath(a.model) if a.model.endswith(".py") else a.model}
    unused = _unused(a.model)
    for action in parser._actions:
        if action.dest not in _NOT_RECIPE and action.dest != "model" and action.dest not in unused:
            recipe[action.dest] = getattr(a, action.dest)
    return recipe


def _recipe_argv(text: str, parser: argparse.ArgumentParser) -> tuple[list[str], str | None]:
    """The command-line arguments that a recipe (JSON text, a JSON file, or a trace whose meta has
    capture.recipe) stands for, and the file it was read from (None for JSON text)."""
    path = None
    if text.lstrip()[:1] not in ("{", "[", '"'):
        path = text
        special = not_a_regular_file(path)
        if special:
            raise ValueError(f"{path}: {special}")
        head = file_bytes.read(path, 0, 16)   # a trace is read through SQLite, not into memory whole
        if head is None:
            with open(path, "rb"):   # the reason it cannot be read (no such file, a folder), as open() says it
                head = b""
        if head.startswith(b"SQLite format 3\0"):  # a trace: the recipe it was captured with
            from .store import TraceError, read_meta

            try:
                text = read_meta(path).get("capture.recipe")
            except TraceError as e:
                raise ValueError(str(e)) from None
            if text is None:
                raise ValueError(f"{path}: the trace has no capture.recipe (not captured by mhc-torch capture)")
            where = f"{path}: meta capture.recipe"
        elif head.startswith(b"\x1f\x8b"):  # a trace or a JSON file kept gzip-compressed
            how = f"gunzip -k {path}" if path.endswith(".gz") else f"gunzip -c {path} > FILE"
            raise ValueError(f"{path}: gzip-compressed (a JSON file or a trace was expected): "
                             f"decompress it first ({how})")
        else:
            try:
                text = json_input.read_file(path, "recipe file").decode("utf-8")
            except UnicodeDecodeError:
                raise ValueError(f"{path}: not UTF-8 text (a JSON file or a trace was expected)") from None
            except ValueError as e:
                raise ValueError(f"{path}: {e}") from None
            where = path
        try:
            return _recipe_words(text, parser), path
        except ValueError as e:   # what the file holds: said naming it, as a setting file's problems are
            raise ValueError(f"{where}: {e}") from None
    return _recipe_words(text, parser), path


def _recipe_words(text, parser: argparse.ArgumentParser) -> list[str]:
    """The command-line arguments of a recipe's JSON text."""
    import json

    recipe = json_input.loads(text)
    if not isinstance(recipe, dict) or not isinstance(recipe.get("model"), str):
        raise ValueError("expected a JSON object with a \"model\"")
    options = {a.dest: a for a in parser._actions if a.dest not in _NOT_RECIPE and a.dest != "model"}
    argv = [recipe["model"]]
    unused = _unused(recipe["model"])
    for key, value in recipe.items():
        if key == "model" or value is None:
            continue
        action = options.get(key)
        if action is None:
            raise ValueError(f"unknown key '{key}'; valid: model, {', '.join(options)}")
        if key in unused:
            continue  # written by earlier versions for every model (a model file's too); it never did anything
        if isinstance(action, argparse._StoreTrueAction):
            if not isinstance(value, bool):
                raise ValueError(f"{key}: expected true or false, got {json.dumps(value)}")
            argv += [action.option_strings[-1]] if value else []
        else:
            want = int if action.type is whole else str
            if want is int and (isinstance(value, bool) or not isinstance(value, int)) or \
                    want is str and not isinstance(value, str):
                kind = "an integer" if want is int else "a string"
                raise ValueError(f"{key}: expected {kind}, got {json.dumps(value)}")
            argv += [action.option_strings[-1], str(value)]
    return argv


def _from_recipe(a, p: argparse.ArgumentParser, c: argparse.ArgumentParser, argv) -> argparse.Namespace | int:
    """`capture --recipe`: the arguments the recipe stands for, parsed as if given (the output and
    what is applied to the step as given), or the exit status of a refusal (said)."""
    # MODEL beside --recipe only as the model file to run in place of the one the recipe names
    if a.model is not None and not a.model.endswith(".py"):
        _say("mhc-torch: give either MODEL with its options or --recipe")
        return 2
    # An option of the step beside --recipe, which holds them all, was dropped without a word
    # (--recipe T.db --steps 5 captured the recipe's one step).
    words = [w.split("=", 1)[0] for w in (sys.argv[1:] if argv is None else argv)]
    for action in c._actions:
        if action.dest in _NOT_RECIPE or action.dest == "model" or not action.option_strings:
            continue
        if getattr(a, action.dest) != action.default or any(o in words for o in action.option_strings):
            _say(f"mhc-torch: {action.option_strings[-1]} and --recipe: the recipe holds the step's options; "
                 "give one (or edit the recipe's JSON)")
            return 2
    try:
        rest, source = _recipe_argv(a.recipe, c)
    except OSError as e:
        _say(f"mhc-torch: recipe: {a.recipe}: {e.strerror or e}")
        return 2
    except ValueError as e:
        _say(f"mhc-torch: recipe: {e}")
        return 2
    named = rest[0]
    if a.model is not None:
        if not named.endswith(".py"):
            _say(f"mhc-torch: MODEL {a.model} and --recipe: the recipe captures the preset '{named}', "
                 "not a model file; give either MODEL with its options or --recipe")
            return 2
        rest[0] = a.model
    elif named.endswith(".py") and source is not None:
        # A model file runs as Python: a trace or JSON file (anyone's) names it, so it runs only
        # when the user names the file to run, as mhc advise --verify runs it only as --model.
        _say(f"mhc-torch: recipe: {source}: names the model file {named}, which runs as Python: a model "
             f"file a trace or recipe file names runs only when you name it: mhc-torch capture "
             f"{named} --recipe {source} ...")
        return 2
    return p.parse_args(["capture", *rest, "-o", a.out] + (["--setting", a.setting] if a.setting is not None else [])
                        + (["--force"] if a.force else [])
                        + (["--kernel-times", a.kernel_times] if a.kernel_times is not None else [])
                        + (["--max-input-size", str(a.max_input_size)] if a.max_input_size != c.get_default(
                            "max_input_size") else []))
