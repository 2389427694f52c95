"""A text encoder over variable-length sequences without padding, as PyTorch's tutorial
"Accelerating PyTorch Transformers by replacing nn.Transformer with Nested Tensors" writes it:
each batch is a nested tensor of jagged layout (torch.nested.nested_tensor(..., layout=torch.jagged),
one row per document, lengths 64 to 2048 tokens), the blocks' Linear layers and
F.scaled_dot_product_attention run on it directly (no padding, no mask), the loss a token-level
cross-entropy over the jagged values (a masked-LM-style head). 8 pre-norm blocks of d_model 1024,
16 heads, vocabulary 32,000; 16 documents, 16,128 tokens a step; AdamW, bf16 autocast."""
import torch
import torch.nn.functional as F
from torch import nn

VOCAB, D, HEADS, LAYERS = 32000, 1024, 16, 8
LENGTHS = [64, 2048, 512, 1024, 128, 1536, 896, 256, 1792, 384, 1280, 640, 2048, 768, 1152, 1600]


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):                          # x: [B, j, d], jagged
        b, d = x.size(0), x.size(-1)
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        q, k, v = (t.unflatten(-1, (self.heads, d // self.heads)).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v)
        x = x + self.proj(y.transpose(1, 2).flatten(-2))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class JaggedEncoder(nn.Module):
    def __init__(self, vocab=VOCAB, d=D, heads=HEADS, layers=LAYERS):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, ids):                        # ids: [B, j], jagged
        x = torch.nested.nested_tensor_from_jagged(self.embed(ids.values()), ids.offsets())
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.norm(x.values()))     # [total tokens, vocab]


def build_model(small=False):
    return JaggedEncoder(512, 64, 4, 2) if small else JaggedEncoder()


def make_batch(small=False):
    lengths = [5, 17, 9] if small else LENGTHS
    vocab = 512 if small else VOCAB
    docs = [torch.randint(0, vocab, (n,)) for n in lengths]
    ids = torch.nested.nested_tensor(docs, layout=torch.jagged)
    return {"ids": ids, "labels": torch.cat(docs)}


def loss_fn(model, batch):
    logits = model(batch["ids"])
    return F.cross_entropy(logits.float(), batch["labels"])
