"""An LSTM language model (AWD-LSTM's shape without its regularisers): embedding 1024, 4 stacked
nn.LSTM layers of 2048 units kept in an nn.ModuleList with dropout between them (cuDNN's RNN
kernel on a GPU), batch 64 x 256 tokens, vocabulary 32,000. The capture runs cuDNN's kernel as a GPU
does, its reserve space estimated, and says so in a note (docs/torch.md, "Recurrent layers")."""
import torch
import torch.nn.functional as F
from torch import nn

VOCAB, EMBED, HIDDEN, LAYERS, BATCH, SEQ = 32000, 1024, 2048, 4, 64, 256


class LstmLm(nn.Module):
    def __init__(self, vocab=VOCAB, embed=EMBED, hidden=HIDDEN, layers=LAYERS):
        super().__init__()
        self.embed = nn.Embedding(vocab, embed)
        self.rnns = nn.ModuleList(nn.LSTM(embed if i == 0 else hidden, hidden, batch_first=True)
                                  for i in range(layers))
        self.proj = nn.Linear(hidden, embed)
        self.head = nn.Linear(embed, vocab)
        self.drop = nn.Dropout(0.2)

    def forward(self, ids):
        x = self.drop(self.embed(ids))
        for rnn in self.rnns:
            x, _ = rnn(x)
            x = self.drop(x)
        return self.head(self.proj(x))


def build_model(small=False):
    return LstmLm(512, 32, 64) if small else LstmLm()


def make_batch(small=False):
    ids = torch.randint(0, 512 if small else VOCAB, (2, 16) if small else (BATCH, SEQ))
    return {"ids": ids, "labels": ids.clone()}


def loss_fn(model, batch):
    logits = model(batch["ids"])
    return F.cross_entropy(logits.flatten(0, 1).float(), batch["labels"].flatten())
