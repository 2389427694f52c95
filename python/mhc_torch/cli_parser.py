"""mhc-torch's argument parser: argparse with mhc's rules for the command line (docs/cli.md) and its
one-line refusals."""
from __future__ import annotations

import argparse
import re
import sys

from .cli_io import _stdout_failed
from .help_format import format_help
from .number_grammar import capped_words, printable


class _Counted:
    """An option's action that counts how often it is given (argparse keeps the last silently)."""

    def __call__(self, parser, namespace, values, option_string=None):
        if option_string is not None:
            given = namespace.__dict__.setdefault("_given", {})
            given[self.dest] = given.get(self.dest, 0) + 1
        super().__call__(parser, namespace, values, option_string)


class _Store(_Counted, argparse._StoreAction):
    pass


class _StoreTrue(_Counted, argparse._StoreTrueAction):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse, its errors in one line (with where to find the usage) and exit status 2, and
    mhc's rules for the command line (docs/cli.md): an option given twice is refused (argparse
    kept the last), a number follows mhc's grammar (number_grammar.whole), and an option is named
    whole (argparse took --step for --steps)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self.register("action", None, _Store)
        self.register("action", "store", _Store)
        self.register("action", "store_true", _StoreTrue)

    def format_help(self):
        """mhc's layout (help_format.py): --out, the old name of --output, still read, not shown."""
        return format_help(self, hidden={"--out"})

    def parse_known_args(self, args=None, namespace=None):
        a, rest = super().parse_known_args(args, namespace)
        given = a.__dict__.pop("_given", {})
        for action in self._actions:
            n = given.get(action.dest, 0)
            if n > 1 and action.option_strings:
                self.error(f"{action.option_strings[-1]} given {n} times; give it once")
        return a, rest

    def _print_message(self, message, file=None):
        """argparse let a failed write go without a word (the help cut short on a full disk, exit 0):
        kept for _finish_stdout to say, the standard output's error only."""
        file = file or sys.stderr
        if not message or file is None:   # no standard error (`2>&-`): None.write was a traceback, exit 1
            return
        try:
            file.write(message)
            if file is sys.stdout:
                file.flush()
        except BrokenPipeError:
            if file is sys.stdout:
                raise
        except OSError as e:
            if file is sys.stdout:
                _stdout_failed(e)

    def error(self, message):
        message = printable(re.sub(r"^argument (-[^ :]*): ", r"\1: ", message))   # as mhc names an option
        # a required argument or option left out, in mhc's words: "the TRACE argument is required",
        # "--output is required" (argparse: "the following arguments are required: -o/--out/--output")
        missing = re.match(r"the following arguments are required: (.*)$", message)
        choice = re.match(r"argument COMMAND: invalid choice: '(.*)' \(choose from (.*)\)$", message)
        if missing and missing.group(1) == "COMMAND" or choice:   # as mhc says a command missing or mistyped
            import difflib

            names = [a for a in self._actions if isinstance(a, argparse._SubParsersAction)][0].choices
            near = difflib.get_close_matches(choice.group(1), names, n=1) if choice else []
            message = (f"'{choice.group(1)}' is not a command" if choice else "a command is required") + \
                (f"; did you mean {near[0]}?" if near else f"; commands: {', '.join(names)}")
        elif re.match(r"(-[^ :]*): invalid choice: '(.*)' \(choose from (.*)\)$", message):
            # an option's name refused as mhc's one_of refuses one: "--gpu: 'h300': use one of ...; did you mean h200?"
            import difflib

            option, value, listed = re.match(r"(-[^ :]*): invalid choice: '(.*)' \(choose from (.*)\)$", message).groups()
            names = [n.strip().strip("'") for n in listed.split(", ")]
            near = difflib.get_close_matches(value, names, n=1)
            message = f"{option}: '{value}': use one of {', '.join(names)}" + (f"; did you mean {near[0]}?" if near else "")
        elif missing:
            message = "; ".join(f"{name.split('/')[-1]} is required" if name.startswith("-")
                                else f"the {name} argument is required" for name in missing.group(1).split(", "))
        self.exit(2, f"{self.prog}: {capped_words(message)} (see {self.prog} --help)\n")
