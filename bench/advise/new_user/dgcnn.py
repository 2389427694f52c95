"""DGCNN for point-cloud classification (as WangYueFT/dgcnn's PyTorch code writes it): 4 EdgeConv
layers, each finding the 20 nearest neighbours of every point in feature space (pairwise distances
by matmul, topk), gathering their features by index (the flat-index idiom of the reference code),
a 1x1 Conv2d + BatchNorm + LeakyReLU over the edge features and a max over the neighbours; then a
1x1 Conv1d to 1024, max and mean pooling and an MLP head; ModelNet40, 1024 points, batch 32,
bf16 autocast, SGD with momentum as the paper trains."""
import torch
import torch.nn.functional as F
from torch import nn

POINTS, K, CLASSES, BATCH = 1024, 20, 40, 32


def knn(x, k):
    inner = -2 * torch.matmul(x.transpose(2, 1), x)
    xx = (x ** 2).sum(1, keepdim=True)
    return (-xx - inner - xx.transpose(2, 1)).topk(k=k, dim=-1)[1]


def edge_features(x, k):
    b, c, n = x.shape
    idx = knn(x, k)
    idx = (idx + torch.arange(b, device=x.device).view(-1, 1, 1) * n).view(-1)
    x = x.transpose(2, 1).contiguous()
    neigh = x.view(b * n, -1)[idx].view(b, n, k, c)
    x = x.view(b, n, 1, c).expand(-1, -1, k, -1)
    return torch.cat((neigh - x, x), 3).permute(0, 3, 1, 2).contiguous()


class EdgeConv(nn.Module):
    def __init__(self, cin, cout, k):
        super().__init__()
        self.k = k
        self.conv = nn.Sequential(nn.Conv2d(2 * cin, cout, 1, bias=False), nn.BatchNorm2d(cout), nn.LeakyReLU(0.2))

    def forward(self, x):
        return self.conv(edge_features(x, self.k)).max(-1)[0]


class DGCNN(nn.Module):
    def __init__(self, k=K, classes=CLASSES, emb=1024):
        super().__init__()
        self.edges = nn.ModuleList([EdgeConv(3, 64, k), EdgeConv(64, 64, k), EdgeConv(64, 128, k), EdgeConv(128, 256, k)])
        self.conv5 = nn.Sequential(nn.Conv1d(512, emb, 1, bias=False), nn.BatchNorm1d(emb), nn.LeakyReLU(0.2))
        self.head = nn.Sequential(nn.Linear(2 * emb, 512, bias=False), nn.BatchNorm1d(512), nn.LeakyReLU(0.2),
                                  nn.Dropout(0.5), nn.Linear(512, 256), nn.BatchNorm1d(256), nn.LeakyReLU(0.2),
                                  nn.Dropout(0.5), nn.Linear(256, classes))

    def forward(self, pts):
        feats, x = [], pts
        for edge in self.edges:
            x = edge(x)
            feats.append(x)
        x = self.conv5(torch.cat(feats, 1))
        return self.head(torch.cat((x.amax(-1), x.mean(-1)), 1))


def build_model(small=False):
    return DGCNN(k=4, classes=5, emb=64) if small else DGCNN()


def make_batch(small=False):
    b, n, c = (4, 32, 5) if small else (BATCH, POINTS, CLASSES)
    return {"pts": torch.randn(b, 3, n), "label": torch.randint(0, c, (b,))}


def loss_fn(model, batch):
    return F.cross_entropy(model(batch["pts"]), batch["label"], label_smoothing=0.2)


def build_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
