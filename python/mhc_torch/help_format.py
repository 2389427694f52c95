"""mhc-torch's --help laid out as mhc's (common/src/help_format.cpp; docs/cli.md, "Help"): the
description, `Usage: PROG [OPTIONS] COMMAND`, then `Arguments:`, `Options:` and `Commands:`, each
entry's text in a column 26 wide (at most a third of the width), wrapped at the terminal's width
(80 columns when the output is not a terminal). An option shows its names once (`-o, --output
FILE`), its value by name (never argparse's `{a,b,c}`), the names it accepts as its choices list
them (`%(choices)s` in its help: `bf16, fp16 or none`), `[required]` and its default as users
write it (`[default: 256MiB]`). Golden files: tests/cli/golden/help/mhc-torch*.txt."""
from __future__ import annotations

import argparse
import os
import sys
import textwrap

HELP_LINE = "Print this help message and exit"   # mhc's words for -h, --help


def help_width() -> int:
    """The terminal's width when stdout is one (at least 40), else 80: mhc::help_width()."""
    try:
        if sys.stdout.isatty():
            return max(40, os.get_terminal_size(sys.stdout.fileno()).columns)
    except (OSError, ValueError, AttributeError):
        pass
    return 80


def names_list(choices) -> str:
    """`a, b or c`, as docs/cli.md lists the names an option accepts."""
    names = [str(c) for c in choices]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def _as_written(action: argparse.Action) -> str:
    """An option's default as a user would type it; a size in the largest binary unit it fills
    whole (268435456 -> 256MiB), as mhc's help writes one."""
    value = action.default
    if getattr(action.type, "__name__", "") == "size" and isinstance(value, int) and value > 0:
        for unit, per in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
            if value % per == 0:
                return f"{value // per}{unit}"
        return f"{value}B"
    return str(value)


def _sentence(text: str) -> str:
    """The text as a sentence starts, a name kept as it is spelled (mHC, cuBLAS)."""
    word = text.split(" ", 1)[0]
    return text[:1].upper() + text[1:] if word.islower() or not word[1:].strip("-+.,:;()") else text

def _value_name(action: argparse.Action) -> str:
    if action.metavar is not None:
        return action.metavar if isinstance(action.metavar, str) else " ".join(action.metavar)
    return action.dest.upper().replace("_", "-")


def describe(action: argparse.Action) -> str:
    if isinstance(action, argparse._HelpAction):
        return HELP_LINE
    text = action.help or ""
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        text = text.replace("%(choices)s", names_list(action.choices))
    text = _sentence(text)
    if action.required and action.option_strings:
        text += " [required]"
    if action.option_strings and action.nargs != 0 and action.default not in (None, argparse.SUPPRESS):
        text += f" [default: {_as_written(action)}]"
    return text


def _two_columns(left: str, right: str, width: int) -> str:
    col = min(30, width // 3)
    head = "  " + left
    if not right:
        return head + "\n"
    wrapped = textwrap.fill(" ".join(right.split()), width=width, initial_indent=" " * col,
                            subsequent_indent=" " * col, break_long_words=False, break_on_hyphens=False)
    if len(head) + 1 > col:
        return head + "\n" + wrapped + "\n"
    return head.ljust(col) + wrapped[col:] + "\n"


def format_help(parser: argparse.ArgumentParser, hidden=frozenset(), description: str | None = None) -> str:
    """The help of `parser` (a command or the program) in mhc's layout. `hidden`: option names
    still read but not shown (an old spelling)."""
    width = help_width()
    hidden = frozenset(hidden)
    positionals = [a for a in parser._actions if not a.option_strings and a.help is not argparse.SUPPRESS]
    commands = [a for a in positionals if isinstance(a, argparse._SubParsersAction)]
    arguments = [a for a in positionals if not isinstance(a, argparse._SubParsersAction)]
    options = [a for a in parser._actions if a.option_strings and a.help is not argparse.SUPPRESS]

    out = ""
    text = description if description is not None else parser.description
    if text:
        out += textwrap.fill(" ".join(text.split()), width=width, break_long_words=False,
                             break_on_hyphens=False) + "\n\n"
    usage = f"Usage: {parser.prog}" + (" [OPTIONS]" if options else "")
    for a in positionals:
        name = "COMMAND" if a in commands else _value_name(a)
        usage += f" {name}" if a.nargs not in ("?", "*") else f" [{name}]"
    out += textwrap.fill(usage, width=width, subsequent_indent=" " * 7, break_long_words=False,
                         break_on_hyphens=False) + "\n"
    if arguments:
        out += "\nArguments:\n" + "".join(_two_columns(_value_name(a), describe(a), width)
                                          for a in arguments)
    if options:
        out += "\nOptions:\n"
        for a in options:
            shown = [n for n in a.option_strings if n not in hidden]
            left = ", ".join(sorted(shown, key=lambda n: n.startswith("--")))
            if a.nargs != 0:
                left += " " + _value_name(a)
            out += _two_columns(left, describe(a), width)
    for a in commands:
        out += "\nCommands:\n" + "".join(_two_columns(c.dest, _sentence(c.help), width)
                                         for c in a._choices_actions)
    return out
