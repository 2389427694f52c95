"""A frozen part run under torch.no_grad() beside a trained one, as in adapter or "frozen tower"
training: the decoder of decoder.py whose embedding and first 3 of 6 blocks are frozen
(requires_grad False) and run under no_grad (nothing saved for a backward), the last 3 blocks,
the final norm and the head trained."""
import torch
from torch import nn

import decoder
from decoder import loss_fn, make_batch  # noqa: F401 - the capture reads them from this file

FROZEN = 3


class PartlyFrozen(decoder.Decoder):
    def forward(self, ids):
        with torch.no_grad():
            x = self.embed(ids)
            for b in self.blocks[:FROZEN]:
                x = b(x)
        for b in self.blocks[FROZEN:]:
            x = b(x)
        return self.head(self.norm(x))


def build_model(small=False):
    m = PartlyFrozen(512, 64, 4) if small else PartlyFrozen()
    for p in list(m.embed.parameters()) + list(m.blocks[:FROZEN].parameters()):
        p.requires_grad_(False)
    return m
