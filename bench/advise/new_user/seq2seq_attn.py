"""A GNMT-style translation model written by hand: a bidirectional 2-layer nn.LSTM encoder (512
units each way, cuDNN on a GPU), an nn.LSTMCell decoder of 1024 units run step by step with
Luong attention over the encoder's states (teacher forcing: each step feeds the reference token),
tied input/output embeddings in the decoder, vocabulary 16,000; batch 64, source 80 and target 60
tokens. The forward takes keyword arguments (src_ids=, tgt_ids=) from a dict batch."""
import torch
import torch.nn.functional as F
from torch import nn

VOCAB, EMBED, HIDDEN, BATCH, SRC, TGT = 16000, 1024, 1024, 64, 80, 60


class Seq2Seq(nn.Module):
    def __init__(self, vocab=VOCAB, embed=EMBED, hidden=HIDDEN):
        super().__init__()
        self.src_embed = nn.Embedding(vocab, embed)
        self.encoder = nn.LSTM(embed, hidden // 2, num_layers=2, bidirectional=True, batch_first=True, dropout=0.1)
        self.tgt_embed = nn.Embedding(vocab, embed)
        self.cell = nn.LSTMCell(2 * embed, hidden)   # the token's embedding and the attention feed
        self.attn_out = nn.Linear(2 * hidden, embed)
        self.out = nn.Linear(embed, vocab, bias=False)
        self.out.weight = self.tgt_embed.weight          # tied

    def forward(self, src_ids, tgt_ids):
        memory, _ = self.encoder(self.src_embed(src_ids))            # batch x src x hidden
        emb = self.tgt_embed(tgt_ids)
        b = src_ids.shape[0]
        h = c = memory.new_zeros(b, memory.shape[-1])
        feed = memory.new_zeros(b, emb.shape[-1])
        logits = []
        for t in range(tgt_ids.shape[1]):
            h, c = self.cell(torch.cat([emb[:, t], feed], -1), (h, c))
            scores = torch.bmm(memory, h.unsqueeze(-1)).squeeze(-1).softmax(-1)
            context = torch.bmm(scores.unsqueeze(1), memory).squeeze(1)
            feed = torch.tanh(self.attn_out(torch.cat([h, context], -1)))
            logits.append(self.out(feed))
        return torch.stack(logits, 1)


def build_model(small=False):
    return Seq2Seq(256, 16, 32) if small else Seq2Seq()


def make_batch(small=False):
    b, s, t, v = (2, 7, 5, 256) if small else (BATCH, SRC, TGT, VOCAB)
    tgt = torch.randint(0, v, (b, t + 1))
    return {"src_ids": torch.randint(0, v, (b, s)), "tgt_ids": tgt[:, :-1], "labels": tgt[:, 1:]}


def loss_fn(model, batch):
    logits = model(src_ids=batch["src_ids"], tgt_ids=batch["tgt_ids"])
    return F.cross_entropy(logits.flatten(0, 1).float(), batch["labels"].flatten())
