"""fp16 mixed precision with loss scaling (captured with --autocast fp16): the step a GPU user
writes with torch.amp.GradScaler, scaling the loss, unscaling and checking the gradients for
infinities before AdamW steps."""
import torch
import torch.nn.functional as F

from decoder import BATCH, SEQ, VOCAB, small_or_full


def build_model(small=False):
    return small_or_full(small)


def make_batch(small=False):
    ids = torch.randint(0, 512 if small else VOCAB, (2, 32) if small else (BATCH, SEQ))
    return {"ids": ids, "labels": ids.clone()}


def loss_fn(model, batch):
    logits = model(batch["ids"])
    return F.cross_entropy(logits.flatten(0, 1).float(), batch["labels"].flatten())


def step(model, batch, run):
    scaler = run.state.setdefault("scaler", torch.amp.GradScaler("cuda"))
    with run.autocast():
        loss = loss_fn(model, batch)
    scaler.scale(loss).backward()
    scaler.step(run.optimizer)
    scaler.update()
    run.zero_grad(set_to_none=True)
