"""Gradient accumulation: the decoder of decoder.py trained on 4 micro-batches of 2 x 1024 tokens
per optimizer step (captured with --micro-batches 4: the loss divided by 4, gradients kept
between micro-batches, one AdamW step)."""
# loss_fn is this model file's (the capture reads it from it): decoder.py's
from decoder import loss_fn, small_or_full  # noqa: F401
import decoder


def build_model(small=False):
    return small_or_full(small)


def make_batch(small=False):
    ids = decoder.make_batch(small)["ids"][:2]  # one micro-batch: 2 sequences
    return {"ids": ids, "labels": ids.clone()}
