"""A small Qwen2 built as a user does it from a config (AutoModelForCausalLM.from_config, no
download), trained with a Trainer-like loop: AdamW over two groups (no weight decay on biases and
norms, as transformers' Trainer groups them), built in the step before the loop; bf16 autocast,
clip_grad_norm_, then step and zero_grad."""
import torch
from transformers import AutoModelForCausalLM, Qwen2Config

BATCH, SEQ = 4, 1024


def build_model(small=False):
    cfg = Qwen2Config(vocab_size=512 if small else 32000, hidden_size=64 if small else 1024,
                      intermediate_size=128 if small else 2816, num_hidden_layers=4 if small else 8,
                      num_attention_heads=4 if small else 16, num_key_value_heads=2 if small else 4,
                      max_position_embeddings=2048, use_cache=False, tie_word_embeddings=True)
    return AutoModelForCausalLM.from_config(cfg)


def make_batch(small=False):
    ids = torch.randint(0, 512 if small else 32000, (2, 32) if small else (BATCH, SEQ))
    return {"input_ids": ids, "labels": ids.clone()}


def step(model, batch, run):
    if "optimizer" not in run.state:
        decay = [p for n, p in model.named_parameters() if p.requires_grad and "norm" not in n and "bias" not in n]
        no_decay = [p for n, p in model.named_parameters() if p.requires_grad and ("norm" in n or "bias" in n)]
        run.state["optimizer"] = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                                                    {"params": no_decay, "weight_decay": 0.0}], lr=5e-5)
        # PASTE HERE (paste_printed.py puts the printed optimizer lines here, as a user would)
    optimizer = run.state["optimizer"]
    model.train()
    with run.autocast():
        loss = model(**batch).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad()
