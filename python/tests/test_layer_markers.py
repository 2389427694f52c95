"""A capture's layer markers do not depend on the interpreter's string hashing: with skip
connections several blocks are open at once in the backward, and the block a kernel ran in was
the first found in ModTracker's set of open modules, whose order follows PYTHONHASHSEED."""
import os
import sqlite3
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch")

# Six blocks; blocks 3 to 5 also read an earlier block's output (a U-Net's skips), so an earlier
# block's backward begins before a later one is seen to end.
MODEL = textwrap.dedent("""
    import sys, torch, mhc_torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.a, self.b = nn.Linear(d, d), nn.Linear(d, d)

        def forward(self, x, skip=None):
            h = self.a(x)
            if skip is not None:
                h = h + self.b(skip)
            return torch.relu(h)

    class Skips(nn.Module):
        def __init__(self, d=64):
            super().__init__()
            self.blocks = nn.ModuleList(Block(d) for _ in range(6))

        def forward(self, x):
            b = self.blocks
            h0 = b[0](x)
            h1 = b[1](h0)
            h2 = b[2](h1)
            h3 = b[3](h2, h2)
            h4 = b[4](h3, h1)
            return b[5](h4, h0).sum()

    mhc_torch.capture(Skips, lambda: torch.randn(8, 64), steps=1, path=sys.argv[1], loss_fn=lambda m, x: m(x))
""")


def _markers(tmp_path, seed: str) -> list[str]:
    script, path = tmp_path / "skips.py", tmp_path / f"skips-{seed}.db"
    script.write_text(MODEL)
    env = dict(os.environ, PYTHONHASHSEED=seed)
    subprocess.run([sys.executable, str(script), str(path)], check=True, env=env, capture_output=True)
    db = sqlite3.connect(path)
    try:
        return [r[0] for r in db.execute("SELECT s.text FROM markers m JOIN strings s ON s.id = m.name "
                                         "ORDER BY m.t_start, m.id")]
    finally:
        db.close()


def test_layer_markers_do_not_follow_string_hashing(tmp_path):
    # seeds 1 and 3 gave different markers before (3: layer 5, 3, 5, 0 in the backward)
    one, three = _markers(tmp_path, "1"), _markers(tmp_path, "3")
    assert one == three
    backward = [m for m in one if m.endswith(" backward")]
    assert backward == [f"layer {i} backward" for i in range(5, -1, -1)]
