"""Knowledge distillation of a BERT-base classifier into a DistilBERT student, as Hugging Face's
distillation tutorials write the loop: the teacher (transformers BertForSequenceClassification
from a config, no download; 12 layers) in eval mode, frozen, run under torch.no_grad(); the
student (DistilBertForSequenceClassification, 6 layers) trained on alpha x the KL divergence of
the temperature-softened distributions (T = 2, times T^2) plus (1 - alpha) x the cross-entropy to
the labels; AdamW(lr 5e-5), a linear schedule, bf16 autocast. Batch 32 x 512, 3 labels."""
import torch
import torch.nn.functional as F
from transformers import (BertConfig, BertForSequenceClassification, DistilBertConfig,
                          DistilBertForSequenceClassification, get_linear_schedule_with_warmup)

BATCH, SEQ, VOCAB, LABELS, TEMP, ALPHA = 32, 512, 30522, 3, 2.0, 0.5


def build_model(small=False):
    cfg = DistilBertConfig(vocab_size=512 if small else VOCAB, dim=64 if small else 768, n_layers=2 if small else 6,
                           n_heads=4 if small else 12, hidden_dim=128 if small else 3072, num_labels=LABELS)
    return DistilBertForSequenceClassification(cfg)


def teacher_for(student):
    small = student.config.dim == 64
    cfg = BertConfig(vocab_size=student.config.vocab_size, hidden_size=student.config.dim,
                     num_hidden_layers=4 if small else 12, num_attention_heads=student.config.n_heads,
                     intermediate_size=student.config.hidden_dim, num_labels=LABELS)
    return BertForSequenceClassification(cfg).cuda().eval().requires_grad_(False)


def make_batch(small=False):
    n, s = (2, 32) if small else (BATCH, SEQ)
    ids = torch.randint(0, 512 if small else VOCAB, (n, s))
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": torch.randint(0, LABELS, (n,))}


def step(model, batch, run):
    if "optimizer" not in run.state:
        run.state["teacher"] = teacher_for(model)
        run.state["optimizer"] = torch.optim.AdamW(model.parameters(), lr=5e-5)
        # PASTE HERE
        run.state["scheduler"] = get_linear_schedule_with_warmup(run.state["optimizer"], 500, 10000)
    teacher, opt, sched = run.state["teacher"], run.state["optimizer"], run.state["scheduler"]
    batch = {k: v.cuda() for k, v in batch.items()}
    model.train()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        with torch.no_grad():
            t_logits = teacher(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        out = model(**batch)
        kd = F.kl_div(F.log_softmax(out.logits.float() / TEMP, -1), F.softmax(t_logits.float() / TEMP, -1),
                      reduction="batchmean") * TEMP ** 2
        loss = ALPHA * kd + (1 - ALPHA) * out.loss
    loss.backward()
    opt.step()
    sched.step()
    opt.zero_grad(set_to_none=True)
