"""Semantic segmentation with deformable convolutions (DCNv2, Zhu et al. 2019): a torchvision
ResNet-50 whose 3 x 3 convolutions in stages 3 and 4 are `torchvision.ops.DeformConv2d` with a
modulation mask, their offsets and masks predicted by a plain convolution initialised to zero (as
the DCNv2 papers and mmcv's ModulatedDeformConv2dPack do), stride 8 by dilation as DeepLab runs it,
an FCN head, cross entropy with ignore index 255 on 512 x 512 crops of 19 classes (Cityscapes'),
SGD with momentum, bf16 autocast. Batch 8."""
import torch
import torch.nn.functional as F
import torchvision
from torch import nn
from torchvision.ops import DeformConv2d

CLASSES, BATCH, CROP = 19, 8, 512


class ModulatedDeform(nn.Module):
    """A 3 x 3 DeformConv2d with its offset-and-mask predictor, in place of a block's conv2."""

    def __init__(self, conv: nn.Conv2d):
        super().__init__()
        k = conv.kernel_size
        self.offset = nn.Conv2d(conv.in_channels, 3 * k[0] * k[1], k, conv.stride, conv.padding, conv.dilation)
        nn.init.zeros_(self.offset.weight)
        nn.init.zeros_(self.offset.bias)
        self.conv = DeformConv2d(conv.in_channels, conv.out_channels, k, conv.stride, conv.padding, conv.dilation,
                                 bias=False)

    def forward(self, x):
        dy_dx, mask = self.offset(x).split([2 * 9, 9], dim=1)
        return self.conv(x, dy_dx, torch.sigmoid(mask))


class DCNSeg(nn.Module):
    def __init__(self, backbone, width):
        super().__init__()
        for stage in (backbone.layer3, backbone.layer4):
            for block in stage:
                block.conv2 = ModulatedDeform(block.conv2)
        self.backbone = backbone
        self.head = nn.Sequential(nn.Conv2d(width, 512, 3, padding=1, bias=False), nn.BatchNorm2d(512), nn.ReLU(),
                                  nn.Dropout(0.1), nn.Conv2d(512, CLASSES, 1))

    def forward(self, x):
        b = self.backbone
        h = b.maxpool(b.relu(b.bn1(b.conv1(x))))
        h = b.layer4(b.layer3(b.layer2(b.layer1(h))))
        return F.interpolate(self.head(h), size=x.shape[-2:], mode="bilinear", align_corners=False)


def build_model(small=False):
    if small:
        net = torchvision.models.resnet18(num_classes=1, replace_stride_with_dilation=None)
        return DCNSeg(net, 512)
    net = torchvision.models.resnet50(replace_stride_with_dilation=[False, True, True])
    return DCNSeg(net, 2048)


def make_batch(small=False):
    n, s = (2, 64) if small else (BATCH, CROP)
    labels = torch.randint(0, CLASSES, (n, s, s))
    labels[:, :8] = 255   # the void label of the crop's padded border
    return torch.randn(n, 3, s, s), labels


def loss_fn(model, batch):
    images, labels = batch
    return F.cross_entropy(model(images).float(), labels, ignore_index=255)


def build_optimizer(model):
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    return opt
