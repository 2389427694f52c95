"""A ViT-B/16 (torchvision) trained with the Lion optimizer written in the training script itself
(a torch.optim.Optimizer subclass of 20 lines, as the paper's pseudo-code and lucidrains'
lion-pytorch write it: one momentum buffer, the update the sign of an interpolation), with its
own parameter groups (no weight decay on biases and norms); ImageNet 224 x 224, batch 128, bf16
autocast."""
import torch
import torch.nn.functional as F
import torchvision

BATCH, CLASSES = 128, 1000


class Lion(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0):
        super().__init__(params, dict(lr=lr, betas=betas, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["exp_avg"] = torch.zeros_like(p)
                exp_avg = state["exp_avg"]
                p.mul_(1 - group["lr"] * group["weight_decay"])
                update = exp_avg.mul(beta1).add_(p.grad, alpha=1 - beta1).sign_()
                p.add_(update, alpha=-group["lr"])
                exp_avg.mul_(beta2).add_(p.grad, alpha=1 - beta2)


def build_model(small=False):
    if small:
        return torchvision.models.VisionTransformer(32, 8, 2, 2, 32, 64, num_classes=10)
    return torchvision.models.vit_b_16()


def make_batch(small=False):
    b, s, c = (2, 32, 10) if small else (BATCH, 224, CLASSES)
    return {"x": torch.randn(b, 3, s, s), "y": torch.randint(0, c, (b,))}


def loss_fn(model, batch):
    return F.cross_entropy(model(batch["x"]), batch["y"], label_smoothing=0.1)


def build_optimizer(model):
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    return Lion([{"params": decay, "weight_decay": 1.0}, {"params": no_decay, "weight_decay": 0.0}], lr=3e-5)
