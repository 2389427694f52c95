"""A two-tower dense retriever (DPR-style: a query encoder and a passage encoder, each a BERT-base
shape from transformers' BertConfig, 6 layers here, no weights) trained with in-batch negatives
(each query's positive passage is its own row, every other passage of the batch a negative;
temperature 0.05) and GradCache (Gao et al., "Scaling Deep Contrastive Learning Batch Size under
Memory Limited Setup"): the representations of the whole batch are computed under no_grad in
chunks, the contrastive loss is taken over them and its gradient with respect to them, then each
chunk is encoded again with gradients and backpropagated with its slice of that gradient
(reps.backward(gradient=...)), so the activations of one chunk are alive at a time; one AdamW step
after all chunks. 128 queries (32 tokens) and 128 passages (128 tokens), chunks of 32; bf16
autocast."""
import torch
import torch.nn.functional as F
from torch import nn
from transformers import BertConfig, BertModel

QUERIES, QLEN, PLEN, CHUNK, TEMP = 128, 32, 128, 32, 0.05


class TwoTower(nn.Module):
    def __init__(self, small=False):
        super().__init__()
        cfg = BertConfig(vocab_size=512 if small else 30522, hidden_size=32 if small else 768,
                         num_hidden_layers=2 if small else 6, num_attention_heads=2 if small else 12,
                         intermediate_size=64 if small else 3072, max_position_embeddings=PLEN)
        self.query_encoder, self.passage_encoder = BertModel(cfg), BertModel(cfg)

    @staticmethod
    def encode(encoder, ids, mask):
        return encoder(input_ids=ids, attention_mask=mask).last_hidden_state[:, 0]   # the [CLS] vector


def build_model(small=False):
    return TwoTower(small)


def make_batch(small=False):
    n, v = (8, 512) if small else (QUERIES, 30522)
    q, p = torch.randint(0, v, (n, QLEN)), torch.randint(0, v, (n, PLEN))
    return {"q": q, "q_mask": torch.ones_like(q), "p": p, "p_mask": torch.ones_like(p)}


def step(model, batch, run):
    if "opt" not in run.state:
        run.state["opt"] = torch.optim.AdamW(model.parameters(), lr=2e-5, weight_decay=0.01)
    opt = run.state["opt"]
    batch = {k: v.cuda(non_blocking=True) for k, v in batch.items()}
    chunk = CHUNK if batch["q"].shape[0] > CHUNK else 4
    towers = [(model.query_encoder, batch["q"], batch["q_mask"]), (model.passage_encoder, batch["p"], batch["p_mask"])]
    # (1) representations of the whole batch, no graph kept
    reps = []
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        for enc, ids, mask in towers:
            reps.append(torch.cat([model.encode(enc, i, m) for i, m in zip(ids.split(chunk), mask.split(chunk))]).float())
    # (2) the in-batch-negative loss and its gradient with respect to the representations
    q, p = (r.requires_grad_(True) for r in reps)
    scores = F.normalize(q, dim=-1) @ F.normalize(p, dim=-1).T / TEMP
    loss = F.cross_entropy(scores, torch.arange(q.shape[0], device=q.device))
    loss.backward()
    # (3) each chunk encoded again with a graph, backpropagated with its slice of the cached gradient
    for (enc, ids, mask), rep in zip(towers, (q, p)):
        for i, m, g in zip(ids.split(chunk), mask.split(chunk), rep.grad.split(chunk)):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                r = model.encode(enc, i, m).float()
            r.backward(gradient=g)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
