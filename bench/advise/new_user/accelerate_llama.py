"""A Hugging Face accelerate training loop, as its examples and `accelerate launch` scripts write
it: a Llama-shaped causal LM (transformers LlamaForCausalLM from a config: 8 layers, hidden 2048,
16 heads, MLP 5632, vocabulary 32,000), Accelerator(mixed_precision="bf16",
gradient_accumulation_steps=2), model and optimizer given to accelerator.prepare (which wraps the
forward in autocast and the optimizer in AcceleratedOptimizer), then in each step:
`with accelerator.accumulate(model):` forward, accelerator.backward(loss), clip_grad_norm_ when
the gradients sync, optimizer.step(), optimizer.zero_grad(). Batch 4 x 2048, AdamW (lr 2e-5)."""
import torch
from accelerate import Accelerator
from transformers import LlamaConfig, LlamaForCausalLM

BATCH, SEQ, VOCAB = 4, 2048, 32000


def build_model(small=False):
    cfg = LlamaConfig(vocab_size=512 if small else VOCAB, hidden_size=64 if small else 2048,
                      intermediate_size=128 if small else 5632, num_hidden_layers=2 if small else 8,
                      num_attention_heads=4 if small else 16, num_key_value_heads=4 if small else 16,
                      max_position_embeddings=SEQ, use_cache=False)
    return LlamaForCausalLM(cfg)


def make_batch(small=False):
    ids = torch.randint(0, 512 if small else VOCAB, (2, 32) if small else (BATCH, SEQ))
    return {"input_ids": ids, "labels": ids.clone()}


def step(model, batch, run):
    if "accelerator" not in run.state:
        acc = Accelerator(mixed_precision="bf16", gradient_accumulation_steps=2)
        run.state["optimizer"] = torch.optim.AdamW(model.parameters(), lr=2e-5)
        # PASTE HERE
        run.state["model"], run.state["optimizer"] = acc.prepare(model, run.state["optimizer"])
        run.state["accelerator"] = acc
    acc, m, opt = run.state["accelerator"], run.state["model"], run.state["optimizer"]
    for _ in range(2):   # the two micro-batches of one optimizer step
        with acc.accumulate(m):
            batch = {k: v.to(acc.device) for k, v in batch.items()}
            loss = m(**batch).loss
            acc.backward(loss)
            if acc.sync_gradients:
                acc.clip_grad_norm_(m.parameters(), 1.0)
            opt.step()
            opt.zero_grad()
