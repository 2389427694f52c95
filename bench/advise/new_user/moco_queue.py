"""MoCo v2 (He et al.; facebookresearch/moco's builder.py) written as its reference code writes
it: one nn.Module holding the query encoder and a momentum key encoder (a copy, parameters with
requires_grad=False, updated by 0.999 EMA under no_grad at each forward), torchvision ResNet-50
trunks with the 2-layer MLP head to 128, and a queue of 65,536 keys kept as a registered buffer
(128 x 65,536, fp32) with its pointer (a Python int here: below); the key encoder runs under no_grad, logits are the
positive against the queue at temperature 0.2, cross-entropy to index 0, and the batch's keys are
written into the queue in place. SGD(lr 0.03, momentum 0.9, weight decay 1e-4), fp16 autocast
with a GradScaler (as MoCo v3's code). Batch 256 of 224 x 224 pairs (single GPU, no shuffled BN)."""
import copy

import torch
import torch.nn.functional as F
import torchvision
from torch import nn

BATCH, IMG, DIM, K, M, T = 256, 224, 128, 65536, 0.999, 0.2


class MoCo(nn.Module):
    def __init__(self, small=False):
        super().__init__()
        arch = torchvision.models.resnet18 if small else torchvision.models.resnet50
        self.encoder_q = arch(num_classes=DIM)
        hidden = self.encoder_q.fc.weight.shape[1]
        self.encoder_q.fc = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), self.encoder_q.fc)
        self.encoder_k = copy.deepcopy(self.encoder_q)
        for p in self.encoder_k.parameters():
            p.requires_grad = False
        k = 1024 if small else K
        self.register_buffer("queue", F.normalize(torch.randn(DIM, k), dim=0))
        # The reference code keeps the pointer in a buffer (torch.zeros(1, dtype=torch.long)) and
        # reads it with int(self.queue_ptr), a value fake tensors do not hold: the capture stops
        # there naming the line ('op aten._local_scalar_dense.default cannot run on fake tensors
        # ... a value read into Python'); kept as a Python int here.
        self.queue_ptr = 0

    @torch.no_grad()
    def _momentum_update_key_encoder(self):
        for pq, pk in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
            pk.data = pk.data * M + pq.data * (1.0 - M)

    @torch.no_grad()
    def _dequeue_and_enqueue(self, keys):
        batch_size = keys.shape[0]
        ptr = self.queue_ptr
        assert self.queue.shape[1] % batch_size == 0
        self.queue[:, ptr:ptr + batch_size] = keys.T
        self.queue_ptr = (ptr + batch_size) % self.queue.shape[1]

    def forward(self, im_q, im_k):
        q = F.normalize(self.encoder_q(im_q), dim=1)
        with torch.no_grad():
            self._momentum_update_key_encoder()
            k = F.normalize(self.encoder_k(im_k), dim=1)
        l_pos = torch.einsum("nc,nc->n", q, k).unsqueeze(-1)
        l_neg = torch.einsum("nc,ck->nk", q, self.queue.clone().detach())
        logits = torch.cat([l_pos, l_neg], dim=1) / T
        labels = torch.zeros(logits.shape[0], dtype=torch.long, device=logits.device)
        self._dequeue_and_enqueue(k)
        return F.cross_entropy(logits.float(), labels)


def build_model(small=False):
    return MoCo(small)


def make_batch(small=False):
    n, s = (4, 32) if small else (BATCH, IMG)
    return torch.randn(n, 3, s, s), torch.randn(n, 3, s, s)


def step(model, batch, run):
    if "optimizer" not in run.state:
        run.state["optimizer"] = torch.optim.SGD(model.parameters(), lr=0.03, momentum=0.9, weight_decay=1e-4)
        # PASTE HERE
        run.state["scaler"] = torch.amp.GradScaler("cuda")
    opt, scaler = run.state["optimizer"], run.state["scaler"]
    im_q, im_k = (x.cuda(non_blocking=True) for x in batch)
    with torch.autocast("cuda", dtype=torch.float16):
        loss = model(im_q, im_k)
    opt.zero_grad(set_to_none=True)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
