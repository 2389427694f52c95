"""The user's model as they train it: torch.compile(model), the decoder of decoder.py."""
import torch
import torch.nn.functional as F

from decoder import BATCH, SEQ, VOCAB, small_or_full


def build_model(small=False):
    return torch.compile(small_or_full(small))


def make_batch(small=False):
    ids = torch.randint(0, 512 if small else VOCAB, (2, 32) if small else (BATCH, SEQ))
    return {"ids": ids, "labels": ids.clone()}


def loss_fn(model, batch):
    logits = model(batch["ids"])
    return F.cross_entropy(logits.flatten(0, 1).float(), batch["labels"].flatten())
