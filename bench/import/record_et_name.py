"""Records a small PyTorch execution trace on the CPU whose one record_function range has the name
given, as PyTorch's ExecutionTraceObserver writes it (the name unescaped).

    python bench/import/record_et_name.py OUT.json 'x", "key": "y'
"""
import sys

import torch
from torch.profiler import ExecutionTraceObserver


def main(path, name):
    observer = ExecutionTraceObserver().register_callback(path)
    observer.start()
    a = torch.ones(64)
    with torch.profiler.record_function(name):
        b = a * 2 + 1
    b.sum()
    observer.stop()
    observer.unregister_callback()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
