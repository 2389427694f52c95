"""mhc-torch's command line against a hostile user: every bad option or model file is one line
(exit 2, no traceback), an option that cannot change the capture is warned about in one line,
an interrupt before the capture is one line (exit 130), and the trace's meta says only what
applied."""
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest

torch = pytest.importorskip("torch")
from mhc_torch import store  # noqa: E402
from mhc_torch.cli import main  # noqa: E402

ENV = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(__file__), "..") + os.pathsep
           + os.environ.get("PYTHONPATH", ""))

GOOD = """
    import torch

    def build_model():
        return torch.nn.Linear(8, 8)

    def make_batch():
        return (torch.randn(4, 8),)
"""


def _cli(capsys, *args, cwd=None):
    """(exit status, stdout, stderr) of `mhc-torch ARGS` run in this process."""
    capsys.readouterr()
    old = os.getcwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        try:
            code = main(list(map(str, args)))
        except SystemExit as e:
            code = e.code
    finally:
        os.chdir(old)
    out, err = capsys.readouterr()
    return code, out, err


def _file(tmp_path, name, body):
    (tmp_path / name).write_text(textwrap.dedent(body))
    return name


@pytest.mark.parametrize("args, message", [
    (["capture", "tiny-gpt2", "--batch", "x"], "mhc-torch capture: --batch: 'x': not a whole number"),
    # in mhc's words (mhc simulate --policy lur, mhc info, mhc simualte)
    (["capture", "tiny-gpt2", "--gpu", "h300", "-o", "o.db"],
     "mhc-torch capture: --gpu: 'h300': use one of a100-40g, a100-80g, h100-pcie, h100-sxm, h200, l40s; "
     "did you mean h200?"),
    (["runs"], "mhc-torch runs: the TRACE argument is required"),
    (["capture", "tiny-gpt2"], "mhc-torch capture: --output is required"),
    (["bogus"], "mhc-torch: 'bogus' is not a command; commands: capture, runs"),
    (["captur"], "mhc-torch: 'captur' is not a command; did you mean capture?"),
    ([], "mhc-torch: a command is required; commands: capture, runs"),
])
def test_command_line_errors_are_one_line(tmp_path, capsys, args, message):
    code, out, err = _cli(capsys, *args, cwd=tmp_path)
    assert code == 2 and len(err.strip().splitlines()) == 1 and err.startswith(message), err
    assert err.strip().endswith("--help)")


@pytest.mark.parametrize("args, message", [
    (["gpt2-small", "--layers", "13"], "mhc-torch: --layers 13: gpt2-small takes at most 12"),
    (["tiny-gpt2", "--batch", "99999999999", "--seq", "32"],
     "mhc-torch: --batch 99999999999 x --seq 32 is 3,199,999,999,968 tokens a step; "
     "at most 2,147,483,648"),
    (["tiny-gpt2", "--seq", str(1 << 23)], "mhc-torch: --seq must be at most 4,194,304 (got 8,388,608)"),
    (["tiny-mhc", "--hc", "17"], "mhc-torch: --hc must be at most 16 (got 17)"),
    (["tiny-gpt2", "--steps", "10000000"], "mhc-torch: --steps must be at most 1,000,000 (got 10,000,000)"),
    (["--recipe", '{"model": "tiny-gpt2", "forward_only": "false"}'],
     'mhc-torch: recipe: forward_only: expected true or false, got "false"'),
    (["--recipe", '{"model": "tiny-gpt2", "seq": "abc"}'], 'mhc-torch: recipe: seq: expected an integer, got "abc"'),
    (["--recipe", '{"model": "tiny-gpt2", "gpu": 3}'], "mhc-torch: recipe: gpu: expected a string, got 3"),
])
def test_numbers_out_of_range_and_recipe_types_refused_in_one_line(tmp_path, capsys, args, message):
    code, out, err = _cli(capsys, "capture", *args, "-o", "o.db", cwd=tmp_path)
    assert (code, err.strip()) == (2, message)
    assert not (tmp_path / "o.db").exists()


@pytest.mark.parametrize("out", ["-", ""])
def test_output_to_standard_output_refused(tmp_path, capsys, out):
    _file(tmp_path, "good.py", GOOD)
    code, _, err = _cli(capsys, "capture", "good.py", "-o", out, cwd=tmp_path)
    assert code == 2 and err.strip() == (f"mhc-torch: '{out}': not a file name; a trace is a SQLite file "
                                         "(-o trace.db), it cannot go to standard output")
    assert sorted(os.listdir(tmp_path)) == ["good.py"]


def test_runs_on_a_directory(tmp_path, capsys):
    code, _, err = _cli(capsys, "runs", str(tmp_path))
    assert (code, err.strip()) == (2, f"mhc-torch: {tmp_path}: is a directory, not a trace")


def test_options_without_effect_warned_and_left_out_of_meta(tmp_path, capsys):
    """A model file makes its own model and batch: --seq/--batch/--hc are warned about, and the
    trace's meta and recipe do not claim them."""
    _file(tmp_path, "good.py", GOOD)
    code, _, err = _cli(capsys, "capture", "good.py", "--seq", "32", "--batch", "2", "--forward-only",
                        "--zero-grad", "zeros", "--autocast", "none", "--autocast-policy", "cpu", "-o", "a.db",
                        cwd=tmp_path)
    assert code == 0, err
    assert err.strip().splitlines() == [
        "mhc-torch: warning: --batch, --seq have no effect: good.py builds its own model and batch (build_model(), "
        "make_batch())",
        "mhc-torch: warning: --zero-grad zeros has no effect: a --forward-only step has no optimizer",
        "mhc-torch: warning: --autocast-policy cpu has no effect with --autocast none"]
    meta = store.read_meta(str(tmp_path / "a.db"))
    assert "capture.seq" not in meta and "capture.batch" not in meta
    recipe = json.loads(meta["capture.recipe"])
    assert not {"batch", "seq", "layers", "hc"} & set(recipe)
    # an older recipe, which had every shape option (tests/data/advise/bert.db: seq 256), runs without their warning
    old = dict(recipe, batch=1, seq=256, hc=4, layers=None)
    code, _, err = _cli(capsys, "capture", "--recipe", json.dumps(old), "-o", "b.db", cwd=tmp_path)
    assert code == 0 and "own model" not in err, err


def test_hc_of_a_model_without_streams_warned(tmp_path, capsys):
    code, _, err = _cli(capsys, "capture", "tiny-gpt2", "--layers", "1", "--seq", "32", "--hc", "2", "-o", "a.db",
                        cwd=tmp_path)
    assert code == 0 and "mhc-torch: warning: --hc has no effect: tiny-gpt2 is not an mHC transformer" in err, err
    assert "capture.hc" not in store.read_meta(str(tmp_path / "a.db"))


_HOOKS = ("import torch\ndef build_model(): return torch.nn.Linear(2, 2)\n"
          "def make_batch(): return (torch.randn(1, 2),)\n")


@pytest.mark.parametrize("body, message", [
    ("import torch\ndef build_model(): return 42\ndef make_batch(): return (torch.randn(1, 2),)\n",
     "m.py: build_model() returned an int, not a torch.nn.Module"),
    (_HOOKS + "loss_fn = 5\n", "m.py: TypeError: loss_fn is an int, not a function"),
    (_HOOKS + "step = None\nstep = 'x'\n", "m.py: TypeError: step is a str, not a function"),
    (_HOOKS + "def loss_fn(model, batch): return 'nope'\n",
     "m.py: TypeError: the loss is a str, not a tensor; loss_fn(model, batch) returns the loss"),
    (_HOOKS + "def loss_fn(model, batch): return model(*batch)\n",
     "m.py: TypeError: the loss has shape [1, 2], not one value; reduce it in loss_fn(model, batch) "
     "(its .sum() or .mean())"),
    (_HOOKS.replace("Linear(2, 2)", "Linear(2, 2).requires_grad_(False)"),
     "m.py: the model has no parameter that requires a gradient: a training step has nothing to train; capture "
     "its inference step with --forward-only (forward_only=True)"),
])
def test_model_file_of_the_wrong_kind_is_one_line(tmp_path, capsys, body, message):
    (tmp_path / "m.py").write_text(body)
    code, _, err = _cli(capsys, "capture", "m.py", "-o", "o.db", cwd=tmp_path)
    assert (code, err.strip()) == (2, "mhc-torch: " + message)
    assert not (tmp_path / "o.db").exists()


def test_frozen_model_captures_forward_only(tmp_path, capsys):
    (tmp_path / "m.py").write_text(_HOOKS.replace("Linear(2, 2)", "Linear(2, 2).requires_grad_(False)"))
    code, _, err = _cli(capsys, "capture", "m.py", "--forward-only", "-o", "o.db", cwd=tmp_path)
    assert code == 0, err


def test_interrupt_while_the_model_file_loads_is_one_line(tmp_path):
    """Ctrl-C before the capture (here while the model file imports): one line, exit 130, no
    traceback, no output."""
    # Generous waits: on a loaded machine the child took over 60 s to reach the model file, and the
    # interrupt then came before it (the file slept its 60 s out: exit 2) or its exit took over 30 s.
    (tmp_path / "slow.py").write_text("import pathlib, time\npathlib.Path('started').touch()\ntime.sleep(900)\n")
    p = subprocess.Popen([sys.executable, "-m", "mhc_torch.cli", "capture", "slow.py", "-o", "o.db"], cwd=tmp_path,
                         env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 600
    while not (tmp_path / "started").exists() and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.05)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    assert (p.returncode, err.strip()) == (130, "mhc-torch: interrupted; no trace written")
    assert not (tmp_path / "o.db").exists()


def test_model_file_that_is_a_directory(tmp_path, capsys):
    (tmp_path / "net.py").mkdir()
    code, _, err = _cli(capsys, "capture", "net.py", "-o", "o.db", cwd=tmp_path)
    assert (code, err.strip()) == (2, "mhc-torch: net.py: is a directory, not a model file")


@pytest.mark.parametrize("text", ["[1, 2]", '"tiny-gpt2"'])
def test_recipe_that_is_json_but_not_an_object(tmp_path, capsys, text):
    code, _, err = _cli(capsys, "capture", "--recipe", text, "-o", "o.db", cwd=tmp_path)
    assert (code, err.strip()) == (2, 'mhc-torch: recipe: expected a JSON object with a "model"')


def test_batch_made_on_cuda_follows_the_model(tmp_path, capsys):
    """A model file written for the GPU (`.cuda()`, `device="cuda"`) captures as written."""
    (tmp_path / "m.py").write_text("import torch\ndef build_model(): return torch.nn.Linear(2, 2).cuda()\n"
                                   "def make_batch(): return (torch.randn(1, 2, device='cuda'),)\n")
    code, _, err = _cli(capsys, "capture", "m.py", "-o", "o.db", cwd=tmp_path)
    assert code == 0, err


def test_optimizer_setting_of_a_forward_only_step_warned(tmp_path, capsys):
    _file(tmp_path, "good.py", GOOD)
    code, _, err = _cli(capsys, "capture", "good.py", "--forward-only", "--setting", '{"optimizer": {"state": "host"}}',
                        "-o", "o.db", cwd=tmp_path)
    assert (code, err.strip()) == (0, 'mhc-torch: warning: the setting\'s "optimizer" has no effect: a --forward-only '
                                      'step has no optimizer')


def test_every_option_has_help_and_its_default():
    """`mhc-torch capture --help` says what each option does, and its default where it has one."""
    from mhc_torch.cli import parsers
    from mhc_torch.help_format import describe

    p, capture = parsers()
    for parser in (capture, *p._subparsers._group_actions[0].choices.values()):
        for action in parser._actions:
            assert action.help, action.option_strings or action.dest
    for action in capture._actions:   # the help's formatter adds "[default: X]" (help_format.py)
        if action.option_strings and action.default not in (None, False, "==SUPPRESS=="):
            assert "default" in describe(action), action.option_strings


def test_runs_table_wraps_at_the_terminal_width(tmp_path, capsys, monkeypatch, mhc_exe):
    """A simulated run has some 50 fields: printed on one line of 1,000 characters (then pandas'
    200-column blocks of internal names and raw floats) it could not be read. The table says a
    run's peak, reduction, loss, stall and swaps as mhc sweep does, in 100 columns; --all gives
    every field, a line each, wrapped at the terminal's width."""
    _file(tmp_path, "good.py", GOOD)
    assert _cli(capsys, "capture", "good.py", "-o", "t.db", cwd=tmp_path)[0] == 0
    subprocess.run([mhc_exe, "simulate", str(tmp_path / "t.db"), "--capacity", "100MB"], check=True,
                   capture_output=True)
    out_sim = subprocess.run([mhc_exe, "-q", "info", str(tmp_path / "t.db")], check=True, capture_output=True,
                             text=True).stdout
    code, out, err = _cli(capsys, "runs", str(tmp_path / "t.db"))
    assert code == 0, err
    lines = out.splitlines()
    # the headings name each figure as mhc sweep, simulate and --json do, over two lines ("stall"
    # alone was a second name for the stall time)
    assert lines[0].split() == ["peak", "throughput", "stall", "swap-in", "swap-out"], out
    assert lines[1].split() == ["id", "kind", "status", "peak", "reduction", "loss", "time", "(H2D)",
                                "(D2H)", "name"], out
    assert max(map(len, lines)) <= 100 and "e+" not in out and "NaN" not in out, out
    # the row's peak, reduction and loss read as mhc info's runs table has them
    info_row = next(line for line in out_sim.splitlines() if line.lstrip().startswith("1 simulated"))
    assert lines[2].split()[:7] == info_row.split()[:7], (lines[2], info_row)
    monkeypatch.setenv("COLUMNS", "100")
    code, out, err = _cli(capsys, "runs", "--all", str(tmp_path / "t.db"))
    assert code == 0, err
    assert "throughput_loss" in out and "config.capacity_bytes" in out and max(map(len, out.splitlines())) <= 100


def test_runs_shows_control_characters_as_mhc_does(tmp_path, capsys, mhc_exe):
    """A run's name with an escape (from the file: anyone's) reached the terminal as it is through
    pandas; an empty TRACE was ": no such file"."""
    trace = str(tmp_path / "t.db")
    subprocess.run([mhc_exe, "-q", "generate", "--preset", "gpt2-small", "--steps", "1", "--layers", "1", "--seq", "32",
                    "-o", trace], check=True, capture_output=True)
    subprocess.run([mhc_exe, "simulate", trace, "--capacity", "90%"], check=True, capture_output=True)
    with sqlite3.connect(trace) as db:
        db.execute("UPDATE runs SET name = 'a' || char(10) || 'b' || char(27) || '[31mred'")
    db.close()
    code, out, err = _cli(capsys, "runs", trace)
    assert code == 0, err
    assert "\x1b" not in out and "a?b?[31mred" in out
    code, _, err = _cli(capsys, "runs", "")
    assert (code, err.strip()) == (2, "mhc-torch: runs: the TRACE argument is empty (mhc-torch runs --help)")


def test_recipe_from_a_trace_and_binary_files_as_json(tmp_path, capsys):
    """--recipe TRACE.db captures again with the recipe in the trace's meta, the model file it names
    run only when given as MODEL (a trace from anyone ran the Python file it named); a binary file
    given as a setting or recipe is one line (it was a UnicodeDecodeError traceback for --setting)."""
    _file(tmp_path, "good.py", GOOD)
    assert _cli(capsys, "capture", "good.py", "--autocast", "none", "-o", "a.db", cwd=tmp_path)[0] == 0
    named = str(tmp_path / "good.py")
    code, _, err = _cli(capsys, "capture", "--recipe", "a.db", "-o", "b.db", cwd=tmp_path)
    assert (code, err.strip()) == (2, f"mhc-torch: recipe: a.db: names the model file {named}, which runs as "
                                      "Python: a model file a trace or recipe file names runs only when you name "
                                      f"it: mhc-torch capture {named} --recipe a.db ...")
    assert not (tmp_path / "b.db").exists()
    code, _, err = _cli(capsys, "capture", "good.py", "--recipe", "a.db", "-o", "b.db", cwd=tmp_path)
    assert code == 0, err
    assert store.read_meta(str(tmp_path / "b.db"))["capture.autocast"] == "none"
    # an option of the step beside --recipe was dropped without a word; a preset's recipe takes no MODEL
    code, _, err = _cli(capsys, "capture", "good.py", "--recipe", "a.db", "--steps", "3", "-o", "s.db", cwd=tmp_path)
    assert (code, err.strip()) == (2, "mhc-torch: --steps and --recipe: the recipe holds the step's options; "
                                      "give one (or edit the recipe's JSON)")
    code, _, err = _cli(capsys, "capture", "good.py", "--recipe", '{"model": "tiny-gpt2"}', "-o", "s.db",
                        cwd=tmp_path)
    assert (code, err.strip()) == (2, "mhc-torch: MODEL good.py and --recipe: the recipe captures the preset "
                                      "'tiny-gpt2', not a model file; give either MODEL with its options or --recipe")
    assert not (tmp_path / "s.db").exists()
    code, _, err = _cli(capsys, "capture", "good.py", "--setting", "a.db", "-o", "c.db", cwd=tmp_path)
    assert (code, err.strip()) == (2, "mhc-torch: setting: a.db: not UTF-8 text (a JSON file was expected)")
    (tmp_path / "x.json").write_bytes(b"\xff\xfe")
    code, _, err = _cli(capsys, "capture", "--recipe", "x.json", "-o", "c.db", cwd=tmp_path)
    assert (code, err.strip()) == (2, "mhc-torch: recipe: x.json: not UTF-8 text (a JSON file or a trace was expected)")


@pytest.mark.parametrize("model, message", [
    ("tiny_gpt2", "unknown model 'tiny_gpt2'; did you mean tiny-gpt2? (valid: llama2-7b, gpt2-small, "
                  "llama3-70b-slice, mhc-27b, tiny-llama, tiny-mhc, tiny-gpt2 or FILE.py)"),
    ("net", "net: a model file's name ends in .py (it is imported as Python)"),
])
def test_misspelled_model_and_a_file_without_py(tmp_path, capsys, model, message):
    _file(tmp_path, "net", GOOD)
    code, _, err = _cli(capsys, "capture", model, "-o", "o.db", cwd=tmp_path)
    assert (code, err.strip()) == (2, "mhc-torch: " + message)


def test_a_preset_captures_without_transformers_noise_and_a_model_files_warnings_are_kept(tmp_path):
    """tiny-gpt2 printed 3 lines of transformers warnings on every capture (bos and eos 50256
    outside its 256-token vocabulary, "`loss_type=None` ... unrecognized"): about the preset's
    config, nothing a user can act on. A model file's own config still warns."""
    r = subprocess.run([sys.executable, "-m", "mhc_torch.cli", "capture", "tiny-gpt2", "--seq", "32", "-o",
                        str(tmp_path / "p.db")], env=ENV, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    (tmp_path / "m.py").write_text(textwrap.dedent("""
        import torch
        from transformers import GPT2Config, GPT2LMHeadModel

        def build_model():
            return GPT2LMHeadModel(GPT2Config(vocab_size=256, n_positions=64, n_embd=32, n_layer=1, n_head=2))

        def make_batch():
            ids = torch.randint(0, 256, (1, 16))
            return {"input_ids": ids, "labels": ids.clone()}
    """))
    r = subprocess.run([sys.executable, "-m", "mhc_torch.cli", "capture", str(tmp_path / "m.py"), "-o",
                        str(tmp_path / "m.db")], env=ENV, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "bos_token_id must be `None` or an integer within the vocabulary" in r.stderr, \
        r.stderr
