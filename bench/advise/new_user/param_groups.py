"""Parameter groups of one's own, given to the capture by build_optimizer(model): the decoder of
decoder.py trained with AdamW(lr 3e-4, betas (0.9, 0.95)) in two groups, weight decay 0.1 on the
matrices and none on biases, norms and the embedding (nanoGPT's configure_optimizers), and a
learning rate 10x smaller for the head."""
import torch

from decoder import loss_fn, make_batch, small_or_full  # noqa: F401 - the capture reads them from this file


def build_model(small=False):
    return small_or_full(small)


def build_optimizer(model):
    head = list(model.head.parameters())
    rest = [(n, p) for n, p in model.named_parameters() if p.requires_grad and not n.startswith("head")]
    decay = [p for n, p in rest if p.dim() >= 2 and not n.startswith("embed")]
    no_decay = [p for n, p in rest if p.dim() < 2 or n.startswith("embed")]
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                              {"params": no_decay, "weight_decay": 0.0},
                              {"params": head, "weight_decay": 0.1, "lr": 3e-5}],
                             lr=3e-4, betas=(0.9, 0.95), foreach=True)
