"""An ESM-2-35M-shaped protein language model (transformers EsmForMaskedLM from a config, no
download: 12 layers, hidden 480, 20 heads, rotary position embeddings, pre-LayerNorm, a 33-token
amino-acid vocabulary) trained with masked-language modelling as the ESM fine-tuning notebooks
do: the batch masked as DataCollatorForLanguageModeling masks it (15% of the residues chosen by
torch.bernoulli, `ids[masked] = MASK`, labels -100 elsewhere: a selection by value, made on the
host as a DataLoader makes it), AdamW(lr 4e-4, weight decay 0.01), fp16 autocast with a
GradScaler. Batch 16 sequences of 1024 residues."""
import torch
from transformers import EsmConfig, EsmForMaskedLM

BATCH, SEQ, VOCAB, MASK_ID = 16, 1024, 33, 32


def build_model(small=False):
    cfg = EsmConfig(vocab_size=VOCAB, hidden_size=64 if small else 480, num_hidden_layers=4 if small else 12,
                    num_attention_heads=4 if small else 20, intermediate_size=128 if small else 1920,
                    max_position_embeddings=1026, position_embedding_type="rotary", emb_layer_norm_before=False,
                    token_dropout=True, mask_token_id=MASK_ID, pad_token_id=1)
    return EsmForMaskedLM(cfg)


def make_batch(small=False):
    n, s = (2, 32) if small else (BATCH, SEQ)
    ids = torch.randint(4, 24, (n, s))
    labels = ids.clone()   # DataCollatorForLanguageModeling's torch_mask_tokens: 80% [MASK], 10% random, 10% kept
    masked = torch.bernoulli(torch.full(ids.shape, 0.15)).bool()
    labels[~masked] = -100
    replaced = torch.bernoulli(torch.full(ids.shape, 0.8)).bool() & masked
    ids[replaced] = MASK_ID
    randomized = torch.bernoulli(torch.full(ids.shape, 0.5)).bool() & masked & ~replaced
    random_words = torch.randint(VOCAB, ids.shape, dtype=torch.long)
    ids[randomized] = random_words[randomized]
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}


def step(model, batch, run):
    if "optimizer" not in run.state:
        run.state["optimizer"] = torch.optim.AdamW(model.parameters(), lr=4e-4, weight_decay=0.01)
        # PASTE HERE
        run.state["scaler"] = torch.amp.GradScaler("cuda")
    opt, scaler = run.state["optimizer"], run.state["scaler"]
    batch = {k: v.cuda(non_blocking=True) for k, v in batch.items()}
    with torch.autocast("cuda", dtype=torch.float16):
        loss = model(**batch).loss
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(opt)
    scaler.update()
    opt.zero_grad(set_to_none=True)
