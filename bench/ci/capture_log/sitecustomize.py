"""Every mhc_torch capture that a Python process started with this folder on PYTHONPATH makes
appends one line to $CAPLOG_OUT as it returns: its CPU seconds (the process's and the children it
waited for), wall seconds, the trace's content digest (meta content_digest: the same digest is the
same trace, whatever made it), steps, the test that ran it ($PYTEST_CURRENT_TEST, which a test's
subprocesses inherit), the process id and its command line. Which captures a suite repeats:
  PYTHONPATH=bench/ci/capture_log CAPLOG_OUT=/tmp/caps.tsv .venv/bin/python -m pytest ...
  awk -F'\t' '{n[$4]++; c[$4]+=$1} END {for (d in n) if (n[d] > 1) print n[d], c[d], d}' /tmp/caps.tsv
The capture is wrapped when mhc_torch.capturing is first imported; nothing else changes."""
import importlib.abc
import importlib.util
import os
import sys
import time

_OUT = os.environ.get("CAPLOG_OUT")


def _cpu():
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _wrap(module):
    inner = module.capture

    def capture(*args, **kwargs):
        c, w = _cpu(), time.time()
        ok = "raised"
        result = None
        try:
            result = inner(*args, **kwargs)
            ok = "ok"
            return result
        finally:
            digest = "-"
            if result is not None:
                try:
                    digest = module.store.read_meta(result.path).get("content_digest", "-")
                except Exception:   # a trace that cannot be read is logged without its digest
                    pass
            test = os.environ.get("PYTEST_CURRENT_TEST", "-").rsplit(" (", 1)[0]
            argv = " ".join(sys.argv)[:200].replace("\t", " ").replace("\n", " ")
            with open(_OUT, "a") as f:
                f.write(f"{_cpu() - c:.2f}\t{time.time() - w:.2f}\t{ok}\t{digest}\t{kwargs.get('steps', 1)}\t"
                        f"{test}\t{os.getpid()}\t{argv}\n")

    capture.__wrapped__ = inner
    capture.__doc__ = inner.__doc__
    module.capture = capture


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "mhc_torch.capturing":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        loader = spec.loader
        run = loader.exec_module

        def exec_module(module):
            run(module)
            _wrap(module)

        loader.exec_module = exec_module
        return spec


if _OUT:
    sys.meta_path.insert(0, _Finder())
