"""Fast neural style transfer (Johnson et al., 2016, as the PyTorch examples' fast_neural_style
trains it) with the loss network's features taken by forward hooks: a frozen torchvision VGG16
(requires_grad False, eval) has register_forward_hook on relu1_2, relu2_2, relu3_3 and relu4_3,
each writing its output into a dict the loss reads (the dict keeps the last call's features
alive after the step). The image transformation network (3 strided convs, 5 residual blocks,
2 upsampling convs, InstanceNorm) is trained on content + style (Gram matrix) loss; batch 8 of
512 x 512, bf16 autocast, Adam (lr 1e-3)."""
import torch
import torch.nn.functional as F
from torch import nn
from torchvision.models import vgg16

BATCH, SIZE = 8, 512
LAYERS = {3: "relu1_2", 8: "relu2_2", 15: "relu3_3", 22: "relu4_3"}


def conv(cin, cout, k, stride=1):
    return nn.Sequential(nn.ReflectionPad2d(k // 2), nn.Conv2d(cin, cout, k, stride))


class Residual(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c1, self.n1 = conv(c, c, 3), nn.InstanceNorm2d(c, affine=True)
        self.c2, self.n2 = conv(c, c, 3), nn.InstanceNorm2d(c, affine=True)

    def forward(self, x):
        return x + self.n2(self.c2(F.relu(self.n1(self.c1(x)))))


class Up(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv, self.norm = conv(cin, cout, 3), nn.InstanceNorm2d(cout, affine=True)

    def forward(self, x):
        return F.relu(self.norm(self.conv(F.interpolate(x, scale_factor=2, mode="nearest"))))


class TransformerNet(nn.Module):
    def __init__(self, w=32):
        super().__init__()
        self.down = nn.Sequential(conv(3, w, 9), nn.InstanceNorm2d(w, affine=True), nn.ReLU(),
                                  conv(w, 2 * w, 3, 2), nn.InstanceNorm2d(2 * w, affine=True), nn.ReLU(),
                                  conv(2 * w, 4 * w, 3, 2), nn.InstanceNorm2d(4 * w, affine=True), nn.ReLU())
        self.res = nn.ModuleList(Residual(4 * w) for _ in range(5))
        self.up1, self.up2 = Up(4 * w, 2 * w), Up(2 * w, w)
        self.out = conv(w, 3, 9)

    def forward(self, x):
        x = self.down(x)
        for r in self.res:
            x = r(x)
        return self.out(self.up2(self.up1(x)))


class StyleTransfer(nn.Module):
    def __init__(self, w=32):
        super().__init__()
        self.net = TransformerNet(w)
        self.vgg = vgg16(weights=None).features[:23].eval()
        self.vgg.requires_grad_(False)
        self.feats = {}
        for i, name in LAYERS.items():
            self.vgg[i].register_forward_hook(self._keep(name))
        self.register_buffer("style_grams", torch.zeros(0))

    def _keep(self, name):
        def hook(module, args, out):
            self.feats[name] = out
        return hook

    def features(self, x):
        self.vgg(x)
        return dict(self.feats)


def gram(f):
    b, c, h, w = f.shape
    f = f.float().flatten(2)
    return f @ f.transpose(1, 2) / (c * h * w)


def build_model(small=False):
    return StyleTransfer(4 if small else 32)


def make_batch(small=False):
    n, s = (2, 32) if small else (BATCH, SIZE)
    return {"content": torch.rand(n, 3, s, s), "style": torch.rand(1, 3, s, s)}


def build_optimizer(model):
    return torch.optim.Adam(model.net.parameters(), lr=1e-3)


def loss_fn(model, batch):
    with torch.no_grad():
        style = {k: gram(v) for k, v in model.features(batch["style"]).items()}
        content = model.features(batch["content"])["relu2_2"]
    y = model.net(batch["content"])
    feats = model.features(y)
    loss = 1e5 * F.mse_loss(feats["relu2_2"].float(), content.float())
    for k, f in feats.items():
        loss = loss + 1e10 * F.mse_loss(gram(f), style[k].expand(f.shape[0], -1, -1))
    return loss
