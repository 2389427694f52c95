"""Second-order MAML (Finn et al.) on miniImageNet 5-way 5-shot, written with torch.func as the
PyTorch MAML tutorials and learn2learn's functional style do: the classic Conv-4 learner (4 blocks
of 3x3 conv with 64 filters, BatchNorm, ReLU, max-pool; 84 x 84 images), a meta-batch of 4 tasks;
for each task 5 inner SGD steps (lr 0.01) on the support set through
torch.func.functional_call with fast weights made by torch.autograd.grad(create_graph=True), so
the outer loss on the query set (15 per class) backpropagates through every inner step; the meta
optimizer Adam (lr 1e-3). fp32, as the reference implementations train."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

WAYS, SHOTS, QUERIES, TASKS, INNER, INNER_LR, SIZE = 5, 5, 15, 4, 5, 0.01, 84


def conv_block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout, track_running_stats=False),
                         nn.ReLU(), nn.MaxPool2d(2))


class Conv4(nn.Module):
    def __init__(self, hidden=64, ways=WAYS, size=SIZE):
        super().__init__()
        self.features = nn.Sequential(conv_block(3, hidden), *(conv_block(hidden, hidden) for _ in range(3)))
        self.head = nn.Linear(hidden * (size // 16) ** 2, ways)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


def build_model(small=False):
    return Conv4(8, size=16) if small else Conv4()


def make_batch(small=False):
    size, tasks = (16, 2) if small else (SIZE, TASKS)
    support = torch.randn(tasks, WAYS * SHOTS, 3, size, size)
    query = torch.randn(tasks, WAYS * QUERIES, 3, size, size)
    ys = torch.arange(WAYS).repeat_interleave(SHOTS).expand(tasks, -1)
    yq = torch.arange(WAYS).repeat_interleave(QUERIES).expand(tasks, -1)
    return support, ys, query, yq


def step(model, batch, run):
    if "optimizer" not in run.state:
        run.state["optimizer"] = torch.optim.Adam(model.parameters(), lr=1e-3)
        # PASTE HERE
    opt = run.state["optimizer"]
    support, ys, query, yq = (t.cuda() for t in batch)
    opt.zero_grad(set_to_none=True)
    for t in range(support.shape[0]):
        fast = dict(model.named_parameters())
        for _ in range(INNER):
            loss = F.cross_entropy(functional_call(model, fast, (support[t],)), ys[t])
            grads = torch.autograd.grad(loss, list(fast.values()), create_graph=True)
            fast = {n: w - INNER_LR * g for (n, w), g in zip(fast.items(), grads)}
        outer = F.cross_entropy(functional_call(model, fast, (query[t],)), yq[t]) / support.shape[0]
        outer.backward()
    opt.step()
