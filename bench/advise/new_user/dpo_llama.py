"""Direct preference optimisation (DPO, Rafailov et al.) as TRL's DPOTrainer runs it without a
PEFT adapter: a Llama-shaped policy (transformers LlamaForCausalLM from a config: 8 layers, hidden
1024, 16 heads, MLP 2816, vocabulary 32,000) and a frozen reference model made from it with
copy.deepcopy (TRL's create_reference_model), eval mode, no gradients, run under torch.no_grad();
each of 4 prompts has a chosen and a rejected answer, concatenated into one batch of 8 x 512
tokens; the loss is -logsigmoid(beta x the difference of the policy's and the reference's log-ratio),
beta 0.1; AdamW(lr 5e-7), bf16 autocast."""
import copy

import torch
import torch.nn.functional as F
from transformers import LlamaConfig, LlamaForCausalLM

PAIRS, SEQ, PROMPT, BETA = 4, 512, 128, 0.1


def build_model(small=False):
    cfg = LlamaConfig(vocab_size=512 if small else 32000, hidden_size=64 if small else 1024,
                      intermediate_size=176 if small else 2816, num_hidden_layers=2 if small else 8,
                      num_attention_heads=4 if small else 16, num_key_value_heads=4 if small else 16,
                      max_position_embeddings=SEQ)
    return LlamaForCausalLM(cfg)


def make_batch(small=False):
    n, t, v = (2, 32, 512) if small else (PAIRS, SEQ, 32000)
    ids = torch.randint(0, v, (2 * n, t))        # chosen rows first, then rejected
    mask = torch.ones(2 * n, t, dtype=torch.long)
    labels = ids.clone()
    labels[:, :(8 if small else PROMPT)] = -100  # the prompt is not scored
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def build_optimizer(model):
    return torch.optim.AdamW(model.parameters(), lr=5e-7)


def sequence_logps(logits, labels):
    logits, labels = logits[:, :-1], labels[:, 1:]
    keep = labels != -100
    picked = torch.gather(logits.log_softmax(-1), 2, labels.clamp(min=0).unsqueeze(2)).squeeze(2)
    return (picked * keep).sum(-1)


def loss_fn(model, batch):
    ref = getattr(loss_fn, "ref", None)
    if ref is None:   # TRL's create_reference_model: a frozen deep copy, made once
        ref = loss_fn.ref = copy.deepcopy(model).eval().requires_grad_(False)
    ids, mask, labels = (batch[k].cuda() for k in ("input_ids", "attention_mask", "labels"))
    with torch.autocast("cuda", dtype=torch.bfloat16):
        policy = sequence_logps(model(input_ids=ids, attention_mask=mask).logits.float(), labels)
        with torch.no_grad():
            reference = sequence_logps(ref(input_ids=ids, attention_mask=mask).logits.float(), labels)
    n = ids.shape[0] // 2
    ratio = (policy[:n] - reference[:n]) - (policy[n:] - reference[n:])
    return -F.logsigmoid(BETA * ratio).mean()
