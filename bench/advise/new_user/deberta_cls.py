"""DeBERTa-v3-base-shaped sequence classification (transformers' DebertaV2ForSequenceClassification
from a config, no download; disentangled attention with relative position embeddings shared by
all layers), fine-tuned as run_glue.py's loop does it: AdamW, a linear warmup-then-decay schedule
(get_linear_schedule_with_warmup) stepped after every optimizer step, clip_grad_norm_ 1.0, bf16
autocast. 8 layers, batch 16 x 512."""
import torch
from transformers import DebertaV2Config, DebertaV2ForSequenceClassification, get_linear_schedule_with_warmup

BATCH, SEQ = 16, 512


def build_model(small=False):
    cfg = DebertaV2Config(vocab_size=512 if small else 128100, hidden_size=64 if small else 768,
                          num_hidden_layers=8, num_attention_heads=4 if small else 12,
                          intermediate_size=128 if small else 3072, max_position_embeddings=512,
                          relative_attention=True, position_buckets=256, norm_rel_ebd="layer_norm",
                          share_att_key=True, pos_att_type=["p2c", "c2p"], position_biased_input=False,
                          num_labels=3, problem_type="single_label_classification")
    # problem_type: without it DeBERTa's loss keeps the rows with labels >= 0 by nonzero(), whose
    # size depends on the labels' values, which the capture refuses (one line naming
    # modeling_deberta_v2.py:1060); with it, the plain CrossEntropyLoss over all rows.
    return DebertaV2ForSequenceClassification(cfg)


def make_batch(small=False):
    n, s = (2, 32) if small else (BATCH, SEQ)
    return {"input_ids": torch.randint(0, 512 if small else 128100, (n, s)),
            "attention_mask": torch.ones(n, s, dtype=torch.long), "labels": torch.randint(0, 3, (n,))}


def step(model, batch, run):
    if "optimizer" not in run.state:
        run.state["optimizer"] = torch.optim.AdamW(model.parameters(), lr=2e-5, weight_decay=0.01)
        # PASTE HERE (paste_printed.py puts the printed optimizer lines here, as a user would)
        run.state["scheduler"] = get_linear_schedule_with_warmup(run.state["optimizer"], num_warmup_steps=100,
                                                                 num_training_steps=1000)
    optimizer, scheduler = run.state["optimizer"], run.state["scheduler"]
    model.train()
    with run.autocast():
        loss = model(**batch).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad()
