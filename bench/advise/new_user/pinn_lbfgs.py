"""A physics-informed neural network (PINN, Raissi et al.) for the 2-D incompressible Navier-Stokes
equations, as the reference code and DeepXDE train it: an MLP of 8 tanh layers of 512 maps
(x, y, t) to (psi, p); the velocities are psi's derivatives and the PDE residuals need second
derivatives, all by torch.autograd.grad(create_graph=True) on 65,536 collocation points; the loss
the residuals' and the data's MSE. Trained as both codes train it: Adam first (the capture's default
AdamW, loss_fn below), then torch.optim.LBFGS (history 50, strong-Wolfe line search) with a closure
that runs forward and backward (step_lbfgs: refused by the capture in one line, LBFGS decides its
closure calls by values)."""
import torch
from torch import nn

POINTS, WIDTH, DEPTH = 65536, 512, 8


class PINN(nn.Module):
    def __init__(self, width=WIDTH, depth=DEPTH):
        super().__init__()
        layers, d = [], 3
        for _ in range(depth):
            layers += [nn.Linear(d, width), nn.Tanh()]
            d = width
        self.net = nn.Sequential(*layers, nn.Linear(d, 2))

    def forward(self, xyt):
        return self.net(xyt)


def build_model(small=False):
    return PINN(32, 3) if small else PINN()


def make_batch(small=False):
    n = 256 if small else POINTS
    return {"xyt": torch.rand(n, 3), "uv": torch.randn(n, 2)}


def _grad(y, x):
    return torch.autograd.grad(y, x, torch.ones_like(y), create_graph=True)[0]


def loss_fn(model, batch, nu=0.01):
    xyt = batch["xyt"].clone().requires_grad_(True)
    out = model(xyt)
    psi, p = out[:, :1], out[:, 1:]
    dpsi = _grad(psi, xyt)
    u, v = dpsi[:, 1:2], -dpsi[:, 0:1]
    du, dv, dp = _grad(u, xyt), _grad(v, xyt), _grad(p, xyt)
    u_xx, u_yy = _grad(du[:, :1], xyt)[:, :1], _grad(du[:, 1:2], xyt)[:, 1:2]
    v_xx, v_yy = _grad(dv[:, :1], xyt)[:, :1], _grad(dv[:, 1:2], xyt)[:, 1:2]
    f = du[:, 2:] + u * du[:, :1] + v * du[:, 1:2] + dp[:, :1] - nu * (u_xx + u_yy)
    g = dv[:, 2:] + u * dv[:, :1] + v * dv[:, 1:2] + dp[:, 1:2] - nu * (v_xx + v_yy)
    data = (u - batch["uv"][:, :1]).square().mean() + (v - batch["uv"][:, 1:]).square().mean()
    return data + f.square().mean() + g.square().mean()


def step_lbfgs(model, batch, run):
    if "opt" not in run.state:
        run.state["opt"] = torch.optim.LBFGS(model.parameters(), lr=1.0, max_iter=4, history_size=50,
                                             line_search_fn="strong_wolfe")
    opt = run.state["opt"]

    def closure():
        opt.zero_grad()
        loss = loss_fn(model, batch)
        loss.backward()
        return loss

    opt.step(closure)
