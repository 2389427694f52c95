"""Gradient accumulation written in the training loop itself (no --micro-batches): a step of the
user's own splits the batch of 8 x 1024 tokens into 4 micro-batches of 2, runs forward and
backward on each (the loss divided by 4) and then steps the optimizer once; the decoder of
decoder.py."""
from decoder import loss_fn, make_batch, small_or_full  # noqa: F401 - the capture reads them from this file

MICRO = 4


def build_model(small=False):
    return small_or_full(small)


def step(model, batch, run):
    ids, labels = batch["ids"].chunk(MICRO), batch["labels"].chunk(MICRO)
    for i, l in zip(ids, labels):
        with run.autocast():
            loss = loss_fn(model, {"ids": i, "labels": l}) / MICRO
        run.backward(loss)
        del loss
    run.optimizer_step()
    run.zero_grad()
