"""mhc-torch: capture a model's training steps (a preset or FILE.py) as a trace on fake tensors, and
print a trace's runs (see docs/torch.md)."""
from __future__ import annotations

import argparse
import sys

from .cli_capture import _capture_command
from .cli_io import (_end_threads_left, _exit_handlers_keep_status, _finish_stdout, _said_instead_of_tracebacks, _say,
                     _stdout_failed, _stdout_to_devnull, _streams_guarded)
from .cli_options import _MOST, _SHAPE
from .cli_parser import _Parser
from .cli_recipe import _from_recipe
from .cli_runs import _runs
from .number_grammar import size, whole


def main(argv=None) -> int:
    """mhc-torch's command line (`argv` None: this process is mhc-torch, run as a program)."""
    _stdout_failed(None)
    if argv is None:
        _said_instead_of_tracebacks()
    with _streams_guarded():   # a failed write to either is recorded, not raised (a traceback, exit 1)
        try:
            code = _main(argv)
        except KeyboardInterrupt:  # before or after the capture's own handling: nothing was written
            _say("mhc-torch: interrupted; no trace written")
            code = 130
        except BrokenPipeError:  # printing the summary, after the trace was written whole
            _stdout_to_devnull()
            code = 141
        except SystemExit as e:  # argparse: --help (0) or a refusal (2, said on stderr)
            code = _finish_stdout(e.code)
        else:
            code = _finish_stdout(code)
    if argv is None:
        _end_threads_left(code)
        _exit_handlers_keep_status()
    return code


def parsers() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """mhc-torch's parser and its capture subcommand's."""
    from .gpus import GPUS
    from .models import PRESETS

    p = _Parser(prog="mhc-torch", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    what = "capture training steps of a preset or FILE.py on fake tensors"
    c = sub.add_parser("capture", help=what, description=what[:1].upper() + what[1:])
    c.add_argument("model", nargs="?", metavar="MODEL",
                   help=f"a preset ({', '.join(PRESETS)}) or FILE.py defining build_model(), make_batch() and "
                        "optionally loss_fn(model, batch), step(model, batch, run) and build_optimizer(model)")
    # --output as every mhc command spells it; --out, its first name here, still read
    c.add_argument("-o", "--out", "--output", dest="out", metavar="FILE", required=True,
                   help="trace file to write (.db); an existing file is refused unless --force")
    c.add_argument("--force", action="store_true", help="replace an existing output (and the runs stored in it)")
    c.add_argument("--setting", metavar="JSON_OR_FILE",
                   help="apply a memory setting with mhc_torch.apply before the first step (docs/torch.md)")
    c.add_argument("--recipe", metavar="JSON_OR_FILE",
                   help="the model and options as a trace's meta capture.recipe has them (instead of MODEL and options)")
    c.add_argument("--gpu", default="h100-sxm", choices=list(GPUS), metavar="GPU",
                   help="the GPU whose roofline times the kernels: %(choices)s")
    c.add_argument("--steps", type=whole, metavar="N", default=1,
                   help=f"training steps captured (at most {_MOST['steps']:,})")
    c.add_argument("--batch", type=whole, metavar="N", help=f"sequences a step (presets; default {_SHAPE['batch']})")
    c.add_argument("--seq", type=whole, metavar="N",
                   help=f"tokens a sequence (presets; default {_SHAPE['seq']}; at most {_MOST['seq']:,})")
    c.add_argument("--layers", type=whole, metavar="N", default=None,
                   help="the first N transformer layers (presets; default and most: the model's own, 4 of "
                        "80 for llama3-70b-slice; the tiny ones at most 64)")
    c.add_argument("--hc", type=whole, metavar="N",
                   help=f"mHC residual streams n (mhc-27b, tiny-mhc; 1 = plain; default {_SHAPE['hc']}; "
                        f"at most {_MOST['hc']})")
    c.add_argument("--autocast", default="bf16", choices=["bf16", "fp16", "none"], metavar="DTYPE",
                   help="autocast of the forward and loss: %(choices)s")
    c.add_argument("--autocast-policy", default="cuda", choices=["cuda", "cpu"], metavar="LISTS",
                   help="whose cast lists autocast follows, CUDA's (the target is a GPU) or torch's CPU ones: "
                        "%(choices)s")
    c.add_argument("--weights", default="as-built", choices=["as-built", "bf16", "fp16", "fp32"], metavar="DTYPE",
                   help="cast the model's parameters and buffers (bf16: bf16 weights, grads and optimizer state; "
                        "as-built: as build_model() made them): %(choices)s")
    c.add_argument("--forward-only", action="store_true", help="forward steps under torch.no_grad() (inference)")
    c.add_argument("--micro-batches", type=whole, metavar="N", default=1,
                   help="forward+backward passes per optimizer step, gradients accumulated")
    c.add_argument("--zero-grad", default="none", choices=["none", "zeros", "never"], metavar="MODE",
                   help="after the optimizer step the grads are set to None, zeroed and kept, or kept: %(choices)s")
    c.add_argument("--optimizer", default="adamw", choices=["adamw", "adamw-fused"], metavar="NAME",
                   help="AdamW with foreach kernels or the fused kernel: %(choices)s")
    c.add_argument("--kernel-times", metavar="PROFILE",
                   help="a PyTorch profiler trace (.json, .json.gz) of the same step on the GPU, recorded with "
                        "record_shapes=True: each kernel takes the time measured there instead of the roofline")
    c.add_argument("--max-input-size", type=size, metavar="SIZE", default=256 << 20,
                   help="the most bytes of the --kernel-times profile read, decompressed")
    what = "print a trace's simulated and replayed runs: peak, loss, stalls, swaps"
    r = sub.add_parser("runs", help=what, description=what[:1].upper() + what[1:])
    r.add_argument("trace", metavar="TRACE", help="a trace file (.db)")
    r.add_argument("--all", action="store_true",
                   help="every stored field of each run (config.* and metrics, as mhc_torch.read_runs reads them)")
    return p, c


def _main(argv=None) -> int:
    p, c = parsers()
    a = p.parse_args(argv)
    recipe = getattr(a, "recipe", None)
    if a.cmd == "capture" and a.recipe is not None:
        a = _from_recipe(a, p, c, argv)
        if isinstance(a, int):
            return a
    if a.cmd == "capture":
        return _capture_command(a, c, recipe)
    return _runs(a)


if __name__ == "__main__":
    sys.exit(main())
