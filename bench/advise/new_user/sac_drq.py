"""Soft actor-critic from pixels as DrQ trains it (Kostrikov, Yarats and Fergus 2020, "Image
Augmentation Is All You Need"; their public drq repository's agent): a 4-layer conv encoder shared
by the actor and the twin critics (the actor reads its conv features detached, through a linear
layer and LayerNorm of its own; the critic's loss trains it), a target critic with its own encoder
updated by Polyak averaging (`torch._foreach_lerp_`), a learned entropy temperature (log alpha),
three Adam optimizers stepped in the user's own step, gradient clipping on the critic, random-shift
augmentation (replicate pad by 4, then `F.grid_sample`), and a replay buffer of 100,000 transitions
of 3 stacked 84 x 84 RGB frames kept on the GPU as uint8 (6.4 GB, allocated with the agent, before
the training loop). Each step writes the 16 parallel environments' new frames into the buffer and
trains on 512 random transitions. fp32, as DrQ trains."""
import copy

import torch
import torch.nn.functional as F
from torch import nn

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
FRAMES, ACTIONS, FEATURE, HIDDEN = 9, 6, 50, 1024
ENVS, BATCH, CAPACITY, TAU, GAMMA = 16, 512, 100_000, 0.01, 0.99


class Encoder(nn.Module):
    def __init__(self, side, ch=32):
        super().__init__()
        self.convs = nn.Sequential(nn.Conv2d(FRAMES, ch, 3, stride=2), nn.ReLU(), nn.Conv2d(ch, ch, 3), nn.ReLU(),
                                   nn.Conv2d(ch, ch, 3), nn.ReLU(), nn.Conv2d(ch, ch, 3), nn.ReLU())
        out = (side - 3) // 2 + 1 - 6
        self.fc, self.ln = nn.Linear(ch * out * out, FEATURE), nn.LayerNorm(FEATURE)

    def forward(self, obs, detach=False):
        h = self.convs(obs / 255.0 - 0.5).flatten(1)
        if detach:
            h = h.detach()
        return torch.tanh(self.ln(self.fc(h)))


def mlp(inp, out, hidden):
    return nn.Sequential(nn.Linear(inp, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, out))


class Critic(nn.Module):
    def __init__(self, side, hidden):
        super().__init__()
        self.encoder = Encoder(side)
        self.q1, self.q2 = mlp(FEATURE + ACTIONS, 1, hidden), mlp(FEATURE + ACTIONS, 1, hidden)

    def forward(self, obs, action, detach=False):
        h = torch.cat([self.encoder(obs, detach), action], dim=1)
        return self.q1(h), self.q2(h)


class Replay:
    """The buffer as DrQ-style GPU loops keep it: tensors made once, written at a moving pointer."""

    def __init__(self, capacity, side):
        self.obs = torch.zeros(capacity, FRAMES, side, side, dtype=torch.uint8, device=DEVICE)
        self.action = torch.zeros(capacity, ACTIONS, device=DEVICE)
        self.reward = torch.zeros(capacity, 1, device=DEVICE)
        self.capacity, self.ptr = capacity, 0

    def add(self, obs, action, reward):
        n = obs.shape[0]
        idx = torch.arange(self.ptr, self.ptr + n, device=DEVICE) % self.capacity
        self.obs[idx], self.action[idx], self.reward[idx] = obs, action, reward
        self.ptr = (self.ptr + n) % self.capacity

    def sample(self, n):
        idx = torch.randint(0, self.capacity - 1, (n,), device=DEVICE)
        return self.obs[idx].float(), self.action[idx], self.reward[idx], self.obs[idx + 1].float()


class Agent(nn.Module):
    def __init__(self, side=84, hidden=HIDDEN, capacity=CAPACITY):
        super().__init__()
        self.critic = Critic(side, hidden)
        self.critic_target = copy.deepcopy(self.critic)
        conv_out = self.critic.encoder.fc.in_features
        self.actor_head = nn.Sequential(nn.Linear(conv_out, FEATURE), nn.LayerNorm(FEATURE), nn.Tanh())
        self.actor_trunk = nn.Sequential(nn.Linear(FEATURE, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                         nn.Linear(hidden, 2 * ACTIONS))
        self.log_alpha = nn.Parameter(torch.tensor(0.1).log())
        self.replay = Replay(capacity, side)

    def act(self, obs):
        """The tanh-squashed Gaussian policy on the critic's conv features (detached)."""
        h = self.critic.encoder.convs(obs / 255.0 - 0.5).flatten(1).detach()
        mu, log_std = self.actor_trunk(self.actor_head(h)).chunk(2, dim=-1)
        std = (-10 + 6 * (torch.tanh(log_std) + 1)).exp()
        dist = torch.distributions.Normal(mu, std)
        u = dist.rsample()
        a = torch.tanh(u)
        log_prob = (dist.log_prob(u) - torch.log1p(-a.pow(2) + 1e-6)).sum(-1, keepdim=True)
        return a, log_prob


def random_shift(x, pad=4):
    """DrQ-v2's RandomShiftsAug: replicate pad, then a random integer shift per image by grid_sample."""
    n, _, h, _ = x.shape
    x = F.pad(x, (pad,) * 4, mode="replicate")
    eps = 1.0 / (h + 2 * pad)
    ar = torch.linspace(-1.0 + eps, 1.0 - eps, h + 2 * pad, device=x.device)[:h]
    ar = ar.unsqueeze(0).repeat(h, 1).unsqueeze(2)
    base = torch.cat([ar, ar.transpose(1, 0)], dim=2).unsqueeze(0).repeat(n, 1, 1, 1)
    shift = torch.randint(0, 2 * pad + 1, (n, 1, 1, 2), device=x.device, dtype=x.dtype) * 2.0 / (h + 2 * pad)
    return F.grid_sample(x, base + shift, padding_mode="zeros", align_corners=False)


def build_model(small=False):
    return Agent(side=36, hidden=32, capacity=64).to(DEVICE) if small else Agent().to(DEVICE)


def make_batch(small=False):
    side = 36 if small else 84
    return {"obs": torch.randint(0, 256, (ENVS, FRAMES, side, side), dtype=torch.uint8),
            "action": torch.rand(ENVS, ACTIONS) * 2 - 1, "reward": torch.rand(ENVS, 1)}


def optimizers(agent):
    critic = torch.optim.Adam(agent.critic.parameters(), lr=1e-3)
    actor = torch.optim.Adam(list(agent.actor_head.parameters()) + list(agent.actor_trunk.parameters()), lr=1e-3)
    alpha = torch.optim.Adam([agent.log_alpha], lr=1e-3, betas=(0.5, 0.999))
    return critic, actor, alpha


def step(agent, batch, run):
    if "opts" not in run.state:
        run.state["opts"] = optimizers(agent)
    critic_opt, actor_opt, alpha_opt = run.state["opts"]
    agent.replay.add(batch["obs"].to(DEVICE), batch["action"].to(DEVICE), batch["reward"].to(DEVICE))
    small = agent.replay.capacity < BATCH
    obs, action, reward, next_obs = agent.replay.sample(8 if small else BATCH)
    obs, next_obs = random_shift(obs), random_shift(next_obs)
    alpha = agent.log_alpha.exp()

    with torch.no_grad():
        next_action, next_log_prob = agent.act(next_obs)
        tq1, tq2 = agent.critic_target(next_obs, next_action)
        target = reward + GAMMA * (torch.min(tq1, tq2) - alpha.detach() * next_log_prob)
    q1, q2 = agent.critic(obs, action)
    critic_loss = F.mse_loss(q1, target) + F.mse_loss(q2, target)
    critic_opt.zero_grad(set_to_none=True)
    critic_loss.backward()
    nn.utils.clip_grad_norm_(agent.critic.parameters(), 10.0)
    critic_opt.step()

    pi, log_prob = agent.act(obs)
    aq1, aq2 = agent.critic(obs, pi, detach=True)
    actor_loss = (alpha.detach() * log_prob - torch.min(aq1, aq2)).mean()
    actor_opt.zero_grad(set_to_none=True)
    actor_loss.backward()
    actor_opt.step()

    alpha_loss = (alpha * (-log_prob - (-ACTIONS)).detach()).mean()
    alpha_opt.zero_grad(set_to_none=True)
    alpha_loss.backward()
    alpha_opt.step()

    with torch.no_grad():
        torch._foreach_lerp_(list(agent.critic_target.parameters()), list(agent.critic.parameters()), TAU)
