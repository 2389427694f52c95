"""mhc-torch's options follow mhc's number grammar and its rule for an option given twice
(docs/cli.md, "Numbers" and "Messages and exit statuses"): every option of every command, read from
its parsers as tests/cli/hostile_input_test.sh reads `mhc --help`, so that a new option is tried
too. Python's int() read ' 5', '+5', '5_0' (as 50) and '٣' (an Arabic-Indic 3); argparse kept the
last of `--steps 1 --steps 2`."""
import argparse
import errno
import os

import pytest

pytest.importorskip("torch")
from mhc_torch import output_file  # noqa: E402
from mhc_torch.cli import main, parsers  # noqa: E402
from mhc_torch.number_grammar import size, whole, whole_number_refusal  # noqa: E402

# What each command needs besides the option tried: a new command must say it here.
BASE = {"capture": ["tiny-gpt2", "-o", "o.db"], "runs": ["t.db"]}
# Options (and arguments) whose value is a name, not a number: a new one must be added here or
# take type=whole (a number) or choices.
TEXT = {"model", "out", "setting", "recipe", "kernel_times", "trace"}
HOSTILE = ["nan", "inf", "-inf", "1e400", "", "0x10", "+5", " 7", "7 ", " 5", "7\n", "\u0663", "1_000", "5_0",
           "010", "08", "1e3", "-0x1", "-1", "99999999999999999999", "7.0", "\uff17"]


def _commands():
    p, _ = parsers()
    sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices


def _options():
    for cmd, parser in _commands().items():
        for action in parser._actions:
            if not isinstance(action, argparse._HelpAction):
                yield cmd, action


def _cli(capsys, tmp_path, argv):
    capsys.readouterr()
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        try:
            code = main(argv)
        except SystemExit as e:
            code = e.code
    finally:
        os.chdir(old)
    return code, capsys.readouterr().err


def test_every_command_and_option_is_known_to_this_test():
    for cmd, action in _options():
        assert cmd in BASE, f"mhc-torch {cmd}: add the command's required arguments to BASE"
        if action.nargs == 0:
            continue  # a flag
        assert action.type in (None, whole, size), (
            f"mhc-torch {cmd} {action.option_strings or action.dest}: type={action.type!r}; a number takes "
            "type=whole, a size type=size (mhc's grammar, number_grammar.py)")
        if action.type is None and action.choices is None:
            assert action.dest in TEXT, (
                f"mhc-torch {cmd} {action.option_strings or action.dest}: takes any text; a number takes "
                "type=whole, a name goes in TEXT")


@pytest.mark.parametrize("cmd, action", [(c, a) for c, a in _options() if a.option_strings and a.nargs != 0],
                         ids=lambda x: x if isinstance(x, str) else x.option_strings[-1])
def test_hostile_values_refused_on_every_option(tmp_path, capsys, cmd, action):
    if action.dest in TEXT:
        pytest.skip("a name: any text may be one")
    name = action.option_strings[-1]
    for v in HOSTILE:
        # argparse takes '-inf' for an option ("expected one argument"): given as --X=-inf
        given = [f"{name}={v}"] if v.startswith("-") else [name, v]
        code, err = _cli(capsys, tmp_path, [cmd, *BASE[cmd], *given])
        assert code == 2 and len(err.strip().splitlines()) == 1, (name, v, err)
        assert err.startswith(f"mhc-torch {cmd}: {name}: "), (name, v, err)
        if action.type is whole:
            shown = v.replace("\n", "?")
            assert f"'{shown}': " in err, (name, v, err)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("cmd, action", [(c, a) for c, a in _options() if a.option_strings],
                         ids=lambda x: x if isinstance(x, str) else x.option_strings[-1])
def test_every_option_given_twice_is_refused(tmp_path, capsys, cmd, action):
    name = action.option_strings[-1]
    value = [] if action.nargs == 0 else ["1"] if action.type is whole else ["1GiB"] if action.type is size else \
        [action.choices[0]] if action.choices else ["o.db"]
    base = BASE[cmd]
    given = 2 + sum(1 for w in base if w in action.option_strings)
    code, err = _cli(capsys, tmp_path, [cmd, *base, name, *value, action.option_strings[0], *value])
    assert (code, err.strip()) == (2, f"mhc-torch {cmd}: {name} given {given} times; give it once "
                                      f"(see mhc-torch {cmd} --help)")


def test_whole_numbers_read_as_mhc_reads_them():
    _, capture = parsers()
    a = capture.parse_args(["tiny-gpt2", "-o", "o.db", "--steps", "5", "--micro-batches", "10", "--batch", "0"])
    assert (a.steps, a.micro_batches, a.batch) == (5, 10, 0)
    # the refusals word for word as common/src/numbers.cpp says them
    assert whole_number_refusal("5_0") == \
        "'5_0': not a whole number (decimal digits only: no sign '+', space, 0x or exponent)"
    assert whole_number_refusal("010") == "'010': a whole number starts with no 0 (it is decimal, not octal)"
    assert whole_number_refusal("-1") == "'-1': must be 0 or more"
    assert whole_number_refusal("-1", negative_ok=True) == ""
    assert whole_number_refusal(str(2**64)) == f"'{2**64}': too large a number"
    assert whole_number_refusal(str(2**64 - 1)) == ""


def test_steps_given_hostile_values_named(tmp_path, capsys):
    code, err = _cli(capsys, tmp_path, ["capture", "tiny-gpt2", "-o", "o.db", "--steps", "5_0"])
    assert (code, err.strip()) == (2, "mhc-torch capture: --steps: '5_0': not a whole number (decimal digits only: "
                                      "no sign '+', space, 0x or exponent) (see mhc-torch capture --help)")
    code, err = _cli(capsys, tmp_path, ["capture", "tiny-gpt2", "-o", "o.db", "--steps", "7\n"])
    assert code == 2 and err.count("\n") == 1 and "--steps: '7?': not a whole number" in err
    code, err = _cli(capsys, tmp_path, ["capture", "tiny-gpt2", "-o", "o.db", "--step", "5"])
    assert code == 2 and "unrecognized arguments: --step 5" in err   # argparse read --step as --steps


def test_output_folders_said_as_mhc_says_them(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("x")
    missing, not_dir = str(tmp_path / "missing" / "o.db"), str(tmp_path / "file" / "o.db")
    with pytest.raises(output_file.OutputError) as e:
        output_file.check_output(missing)
    assert str(e.value) == f"{missing}: cannot write into {tmp_path / 'missing'}: no such directory"
    with pytest.raises(output_file.OutputError) as e:
        output_file.check_output(not_dir)
    assert str(e.value) == f"{not_dir}: cannot write into {tmp_path / 'file'}: not a directory"
    with pytest.raises(output_file.OutputError) as e:
        output_file.check_output("no/o.db")
    assert str(e.value) == "no/o.db: cannot write into no: no such directory"
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if p == str(tmp_path) else real(p, mode, **kw))
    out = str(tmp_path / "o.db")
    with pytest.raises(output_file.OutputError) as e:
        output_file.check_output(out)
    assert str(e.value) == f"{out}: cannot write into {tmp_path}: {os.strerror(errno.EACCES)}"
    assert os.strerror(errno.EACCES) == "Permission denied"


def test_a_gzipped_trace_is_said_to_be_one(tmp_path, capsys):
    """`mhc-torch runs` said "not a trace: file is not a database" of a gzipped trace, and
    --recipe "not UTF-8 text": now gzip-compressed, with how to decompress it, as mhc says it."""
    import gzip
    import sqlite3

    db = sqlite3.connect(tmp_path / "t.db")
    db.execute("CREATE TABLE meta (key TEXT, value TEXT)")
    db.commit()
    db.close()
    (tmp_path / "t.db.gz").write_bytes(gzip.compress((tmp_path / "t.db").read_bytes()))
    (tmp_path / "z.db").write_bytes((tmp_path / "t.db.gz").read_bytes())
    code, err = _cli(capsys, tmp_path, ["runs", "z.db"])
    assert (code, err.strip()) == (2, "mhc-torch: z.db: not a trace: the file is gzip-compressed, not an SQLite "
                                      "database: decompress it first (gunzip -c z.db > trace.db)")
    code, err = _cli(capsys, tmp_path, ["runs", "t.db.gz"])
    assert code == 2 and err.strip().endswith("decompress it first (gunzip -k t.db.gz)"), err
    code, err = _cli(capsys, tmp_path, ["capture", "--recipe", "t.db.gz", "-o", "o.db"])
    assert (code, err.strip()) == (2, "mhc-torch: recipe: t.db.gz: gzip-compressed (a JSON file or a trace was "
                                      "expected): decompress it first (gunzip -k t.db.gz)")
    (tmp_path / "x.db").write_bytes(b"not sqlite at all, but long enough to be read as a header" * 4)
    code, err = _cli(capsys, tmp_path, ["runs", "x.db"])
    assert code == 2 and "gzip" not in err and err.startswith("mhc-torch: x.db: not a trace: "), err
