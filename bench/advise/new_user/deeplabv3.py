"""torchvision's DeepLabV3-ResNet50 semantic segmentation with the auxiliary FCN head, trained as
torchvision's references/segmentation/train.py does: cross-entropy over pixels (ignore_index 255)
on 'out' plus 0.5 x the 'aux' loss, SGD momentum 0.9, weight decay 1e-4, a polynomial LR
(LambdaLR) stepped every iteration, bf16 autocast. 21 VOC classes, batch 8 of 480 x 480 crops."""
import torch
import torch.nn.functional as F
from torchvision.models.segmentation import deeplabv3_resnet50

BATCH, CROP, ITERS = 8, 480, 30000


def build_model(small=False):
    return deeplabv3_resnet50(weights=None, weights_backbone=None, num_classes=21, aux_loss=True)


def make_batch(small=False):
    n, s = (2, 64) if small else (BATCH, CROP)
    target = torch.randint(0, 21, (n, s, s))
    target[:, :4] = 255  # the VOC boundary label, ignored
    return torch.randn(n, 3, s, s), target


def step(model, batch, run):
    if "optimizer" not in run.state:
        params = [{"params": [p for p in model.backbone.parameters() if p.requires_grad]},
                  {"params": [p for p in model.classifier.parameters() if p.requires_grad]},
                  {"params": [p for p in model.aux_classifier.parameters() if p.requires_grad], "lr": 0.02 * 10}]
        run.state["optimizer"] = torch.optim.SGD(params, lr=0.02, momentum=0.9, weight_decay=1e-4)
        # PASTE HERE (paste_printed.py puts the printed optimizer lines here, as a user would)
        run.state["scheduler"] = torch.optim.lr_scheduler.LambdaLR(
            run.state["optimizer"], lambda it: (1 - it / ITERS) ** 0.9)
    optimizer, scheduler = run.state["optimizer"], run.state["scheduler"]
    image, target = batch
    model.train()
    with run.autocast():
        out = model(image)
        loss = F.cross_entropy(out["out"], target, ignore_index=255) + \
            0.5 * F.cross_entropy(out["aux"], target, ignore_index=255)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    scheduler.step()
