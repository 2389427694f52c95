"""One PPO step of RLHF as TRL's PPO trainer runs it: a GPT-2-small-shaped policy
(transformers GPT2LMHeadModel from a config: 12 layers, hidden 768, 12 heads) with a scalar value
head on its last hidden states, a frozen reference copy (copy.deepcopy, eval, no gradients) and a
frozen reward model (a 6-layer GPT-2 with a scalar head); under no_grad the policy samples 32
tokens after each of 16 prompts of 128 tokens with generate() (KV cache, top-k sampling), the
reference, reward and old policy score the rollouts, the advantages are GAE over the response
(gamma 1, lambda 0.95) with the per-token KL penalty (0.05) in the reward; then one PPO epoch of 2
mini-batches of 8: the clipped policy loss (0.2) plus 0.1 x the clipped value loss, backward,
clipping to 1.0, AdamW(lr 1e-5) step each. bf16 autocast."""
import copy

import torch
import torch.nn.functional as F
from torch import nn
from transformers import GPT2Config, GPT2LMHeadModel, GPT2Model

PROMPTS, PROMPT_LEN, NEW, MINI, KL, CLIP = 16, 128, 32, 8, 0.05, 0.2


def config(small, layers):
    return GPT2Config(vocab_size=512 if small else 50257, n_positions=PROMPT_LEN + NEW, n_embd=64 if small else 768,
                      n_layer=2 if small else layers, n_head=4 if small else 12)


class PolicyWithValue(nn.Module):
    def __init__(self, small=False):
        super().__init__()
        self.lm = GPT2LMHeadModel(config(small, 12))
        self.v_head = nn.Linear(self.lm.config.n_embd, 1)

    def forward(self, ids, mask):
        out = self.lm(input_ids=ids, attention_mask=mask, output_hidden_states=True)
        return out.logits, self.v_head(out.hidden_states[-1]).squeeze(-1)


class Reward(nn.Module):
    def __init__(self, small=False):
        super().__init__()
        self.body, self.score = GPT2Model(config(small, 6)), nn.Linear(64 if small else 768, 1)

    def forward(self, ids, mask):
        return self.score(self.body(input_ids=ids, attention_mask=mask).last_hidden_state[:, -1]).squeeze(-1)


def build_model(small=False):
    return PolicyWithValue(small)


def make_batch(small=False):
    n, t, v = (4, 16, 512) if small else (PROMPTS, PROMPT_LEN, 50257)
    return torch.randint(0, v, (n, t))


def token_logps(logits, ids):
    return torch.gather(logits.float().log_softmax(-1), 2, ids.unsqueeze(2)).squeeze(2)


def step(model, prompts, run):
    st = run.state
    if "opt" not in st:
        st["opt"] = torch.optim.AdamW(model.parameters(), lr=1e-5)
        st["ref"] = copy.deepcopy(model.lm).eval().requires_grad_(False)
        st["reward"] = Reward(model.v_head.in_features == 64).cuda().eval().requires_grad_(False)
    opt, ref, reward = st["opt"], st["ref"], st["reward"]
    prompts = prompts.cuda()
    p_len, new = prompts.shape[1], (NEW if prompts.shape[1] == PROMPT_LEN else 8)
    # (1) rollouts and their scores, no graph
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        seqs = model.lm.generate(prompts, attention_mask=torch.ones_like(prompts), max_new_tokens=new,
                                 min_new_tokens=new, do_sample=True, top_k=50, pad_token_id=0)
        mask = torch.ones_like(seqs)
        resp = seqs[:, p_len:]
        logits, values = model(seqs, mask)
        old_logps = token_logps(logits[:, p_len - 1:-1], resp)
        old_values = values[:, p_len - 1:-1].float()
        ref_logps = token_logps(ref(input_ids=seqs, attention_mask=mask).logits[:, p_len - 1:-1], resp)
        score = reward(seqs, mask).float()
        rewards = -KL * (old_logps - ref_logps)
        rewards[:, -1] += score
        adv, last = torch.zeros_like(rewards), torch.zeros_like(score)
        for t in reversed(range(new)):   # GAE, gamma 1, lambda 0.95
            nxt = old_values[:, t + 1] if t + 1 < new else torch.zeros_like(score)
            last = rewards[:, t] + nxt - old_values[:, t] + 0.95 * last
            adv[:, t] = last
        returns = adv + old_values
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    # (2) one PPO epoch over mini-batches
    mini = MINI if seqs.shape[0] > MINI else 2
    for i in range(0, seqs.shape[0], mini):
        s = slice(i, i + mini)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits, values = model(seqs[s], mask[s])
        logps = token_logps(logits[:, p_len - 1:-1], resp[s])
        ratio = (logps - old_logps[s]).exp()
        pg = torch.max(-adv[s] * ratio, -adv[s] * ratio.clamp(1 - CLIP, 1 + CLIP)).mean()
        v = values[:, p_len - 1:-1].float()
        v_clipped = old_values[s] + (v - old_values[s]).clamp(-CLIP, CLIP)
        vf = 0.5 * torch.max((v - returns[s]) ** 2, (v_clipped - returns[s]) ** 2).mean()
        (pg + 0.1 * vf).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
