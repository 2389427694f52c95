"""A BiLSTM-CRF-style sequence tagger (NER) as most tagging code trains it: sentences of unequal
length padded to the batch's longest, the embeddings packed with pack_padded_sequence(lengths,
enforce_sorted=False) so the 2-layer bidirectional LSTM (hidden 1024) skips the padding, unpacked
with pad_packed_sequence, a linear emission layer and token-level cross-entropy over the real
tokens (padding labels -100). Vocabulary 100,000, embeddings 300; batch 64 sentences of 8 to 256
tokens; bf16 autocast (the LSTM runs in fp16 under it, as cuDNN's does), Adam."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

VOCAB, EMB, HIDDEN, TAGS, BATCH, LONGEST = 100000, 300, 1024, 17, 64, 256


class Tagger(nn.Module):
    def __init__(self, vocab=VOCAB, emb=EMB, hidden=HIDDEN, tags=TAGS):
        super().__init__()
        self.embed = nn.Embedding(vocab, emb, padding_idx=0)
        self.lstm = nn.LSTM(emb, hidden, num_layers=2, bidirectional=True, batch_first=True, dropout=0.3)
        self.emit = nn.Linear(2 * hidden, tags)

    def forward(self, ids, lengths):
        packed = pack_padded_sequence(self.embed(ids), lengths, batch_first=True, enforce_sorted=False)
        out, _ = self.lstm(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=ids.shape[1])
        return self.emit(out)


def build_model(small=False):
    return Tagger(500, 16, 32, 5) if small else Tagger()


def make_batch(small=False):
    n, longest = (4, 12) if small else (BATCH, LONGEST)
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(longest // 8, longest + 1, (n,), generator=g)
    lengths[0] = longest
    ids = torch.randint(1, 500 if small else VOCAB, (n, longest), generator=g)
    pad = torch.arange(longest)[None, :] >= lengths[:, None]
    ids[pad] = 0
    labels = torch.randint(0, 5 if small else TAGS, (n, longest), generator=g)
    labels[pad] = -100
    return {"ids": ids, "lengths": lengths.cpu(), "labels": labels}


def build_optimizer(model):
    return torch.optim.Adam(model.parameters(), lr=1e-3)


def loss_fn(model, batch):
    logits = model(batch["ids"], batch["lengths"])
    return F.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten(), ignore_index=-100)
