"""torchvision's Mask R-CNN (ResNet-50 FPN, from the constructor, no weights, 91 COCO classes)
trained as torchvision's references/detection/train.py does: a list of images of different sizes
and a list of target dicts (boxes, labels, masks), the model's dict of five losses summed,
SGD(lr 0.02, momentum 0.9, weight decay 1e-4), 2 images per GPU, fp32. Not capturable on fake
tensors (docs/torch.md): its transform picks a size with .item(), then the RPN's NMS and the box
samplers select by value; mhc-torch capture names the first such op and the line that led there."""
import torch
from torchvision.models.detection import maskrcnn_resnet50_fpn

SIZES = [(480, 640), (512, 600)]


def build_model(small=False):
    return maskrcnn_resnet50_fpn(weights=None, weights_backbone=None, num_classes=91,
                                 min_size=256 if small else 800, max_size=320 if small else 1333)


def make_batch(small=False):
    images, targets = [], []
    for h, w in SIZES:
        if small:
            h, w = h // 4, w // 4
        images.append(torch.rand(3, h, w))
        n = 5
        xy = torch.rand(n, 2) * torch.tensor([w / 2, h / 2])
        wh = torch.rand(n, 2) * torch.tensor([w / 2, h / 2]) + 8
        targets.append({"boxes": torch.cat([xy, xy + wh], 1), "labels": torch.randint(1, 91, (n,)),
                        "masks": (torch.rand(n, h, w) > 0.5).to(torch.uint8)})
    return images, targets


def build_optimizer(model):
    return torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.02, momentum=0.9,
                           weight_decay=1e-4)


def loss_fn(model, batch):
    images, targets = batch
    images = [i.cuda() for i in images]
    targets = [{k: v.cuda() for k, v in t.items()} for t in targets]
    return sum(model(images, targets).values())
