"""A Gemma-2-2B-shaped causal LM (transformers Gemma2ForCausalLM from a config, no download):
attention logits soft-capped at 50 and the final logits at 30 (tanh capping), local sliding-window
(4096) and global attention alternating layer by layer, grouped-query attention 8/4 with head dim
256, a 256,000-token vocabulary with tied embeddings; `attn_implementation="eager"`, which the model
card asks for in training (SDPA has no soft-capping). Full fine-tune with AdamW(lr 2e-5), bf16
autocast, clip_grad_norm_ 1.0; 8 of its 26 layers, batch 1 x 8192 (past the window)."""
import torch
from transformers import Gemma2Config, Gemma2ForCausalLM

BATCH, SEQ, VOCAB = 1, 8192, 256000


def build_model(small=False):
    cfg = Gemma2Config(vocab_size=512 if small else VOCAB, hidden_size=64 if small else 2304,
                       intermediate_size=128 if small else 9216, num_hidden_layers=4 if small else 8,
                       num_attention_heads=4 if small else 8, num_key_value_heads=2 if small else 4,
                       head_dim=16 if small else 256, max_position_embeddings=8192,
                       sliding_window=16 if small else 4096, attn_logit_softcapping=50.0,
                       final_logit_softcapping=30.0, query_pre_attn_scalar=256, use_cache=False,
                       attn_implementation="eager")
    return Gemma2ForCausalLM(cfg)


def make_batch(small=False):
    ids = torch.randint(0, 512 if small else VOCAB, (2, 32) if small else (BATCH, SEQ))
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids.clone()}


def step(model, batch, run):
    if "optimizer" not in run.state:
        run.state["optimizer"] = torch.optim.AdamW(model.parameters(), lr=2e-5)
        # PASTE HERE
    opt = run.state["optimizer"]
    batch = {k: v.to("cuda") for k, v in batch.items()}
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(**batch).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
