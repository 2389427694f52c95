"""mhc-torch's --help reads as mhc's (docs/cli.md, "Help"): `Usage:`, `Arguments:`, `Options:` and
`Commands:`, every option's value by name with the names it accepts listed from its choices, its
default as typed, and each text equal to its golden file in tests/cli/golden/torch-help/ as printed
at 80 columns (not a terminal); on a terminal 60 or 120 columns wide it follows the width. argparse's
own layout (`usage:`, `positional arguments:`, `{a100-40g,...}`) had no golden file.
Regenerate after changing an option, and review the diff:
    MHC_UPDATE_GOLDEN=1 .venv/bin/python -m pytest -q python/tests/test_cli_help.py"""
import argparse
import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios

import pytest

import mhc_torch
from mhc_torch.cli import parsers
from mhc_torch.help_format import names_list

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
GOLDEN = os.path.join(REPO, "tests", "cli", "golden", "torch-help")
ENV = {**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(mhc_torch.__file__))}
ENV.pop("COLUMNS", None)


def _commands() -> dict[str, argparse.ArgumentParser]:
    """Every help text: the program's and each command's, from the parser (a new command too)."""
    p, _ = parsers()
    sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    return {"": p, **sub.choices}


def _help(command: str, stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "mhc_torch.cli", *([command] if command else []), "--help"]
    return subprocess.run(argv, stdout=stdout, stderr=subprocess.PIPE, text=True, env=ENV, timeout=60)


@pytest.mark.parametrize("command", list(_commands()))
def test_help_equals_its_golden_file(command):
    done = _help(command)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    text = done.stdout
    name = "mhc-torch" + (f"-{command}" if command else "") + ".txt"
    path = os.path.join(GOLDEN, name)
    if os.environ.get("MHC_UPDATE_GOLDEN") == "1":
        os.makedirs(GOLDEN, exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    lines = text.splitlines()
    assert max(map(len, lines)) <= 80, [x for x in lines if len(x) > 80]
    assert not [x for x in lines if x != x.rstrip()], "trailing spaces"
    # mhc's words, never argparse's
    usage = next(i for i, x in enumerate(lines) if x.startswith("Usage: mhc-torch"))
    assert lines[0] and usage >= 2 and lines[usage - 1] == "", text   # the description, a blank line, Usage
    for theirs in ("usage:", "positional arguments:", "options:", "show this help message", "{", "--out "):
        assert theirs not in text, f"{name}: argparse's '{theirs}'"
    parser = _commands()[command]
    sections = [x for x in lines if x.endswith(":") and not x.startswith(" ")]
    want = (["Arguments:"] if any(not a.option_strings and not isinstance(a, argparse._SubParsersAction)
                                  for a in parser._actions) else []) + ["Options:"] + \
        (["Commands:"] if command == "" else [])
    assert sections == want, sections
    assert "  -h, --help              Print this help message and exit" in lines   # as mhc prints it
    with open(path) as f:
        assert f.read() == text, f"{name} differs from its golden file (MHC_UPDATE_GOLDEN=1 to rewrite it)"


@pytest.mark.parametrize("command", [c for c in _commands() if c])
def test_every_choice_and_default_is_in_the_help(command):
    """The names an option accepts come from the list it checks (choices), so the help and the
    check cannot part; a default shows as typed."""
    text = " ".join(_help(command).stdout.split())
    for action in _commands()[command]._actions:
        if action.choices is not None:
            assert names_list(action.choices) in text, (action.dest, names_list(action.choices))
            assert f" {action.metavar} " in text, action.dest
        if action.option_strings and action.nargs != 0 and action.default is not None:
            assert "[default: " in text
    if command == "capture":
        assert "[default: 256MiB]" in text and "[default: h100-sxm]" in text


@pytest.mark.parametrize("columns", [60, 120])
def test_help_follows_the_terminals_width(columns):
    main, sub = pty.openpty()
    fcntl.ioctl(sub, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    try:
        done = _help("capture", stdout=sub)
        os.close(sub)
        sub = -1
        out = b""
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:   # EIO: the writer's side closed
                break
            if not chunk:
                break
            out += chunk
    finally:
        if sub >= 0:
            os.close(sub)
        os.close(main)
    assert done.returncode == 0
    widest = max(len(x) for x in out.decode().replace("\r", "").splitlines())
    assert columns - 12 < widest <= columns, widest
