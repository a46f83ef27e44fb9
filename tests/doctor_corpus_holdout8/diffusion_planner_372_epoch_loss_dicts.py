# Source: https://github.com/tier4/Diffusion-Planner/pull/372
#   code: diffusion_planner/train_epoch.py (heading_to_cos_sin, train_epoch) and
#   utils/train_utils.py (compute_grad_stats, get_epoch_mean_loss) at commit 8314659, before
#   the pull request
# Adapted: train_epoch and the helpers kept as they are (tqdm, ddp and the augmentation are
#   off: args.ddp False, rank 0, aug None); the Diffusion Planner model and its
#   compute_training_loss (a VP-SDE denoising loss over ego and neighbour futures) replaced by a
#   small MLP planner and a stand-in with the same signature returning the same loss entries;
#   ModelEma replaced by a small EMA of the parameters; the observation normalizer is the
#   identity; the nuPlan loader is a list of 25 batches of 8 random scenes (10 past and 16
#   future steps, 4 neighbours), 3 epochs, AdamW, cpu, seeded.
from types import SimpleNamespace

import numpy as np
import torch
from torch import nn


def heading_to_cos_sin(x):
    if x.shape[-1] == 4:
        return x
    return torch.cat(
        [
            x[..., :2],
            x[..., 2:3].cos(),
            x[..., 2:3].sin(),
        ],
        dim=-1,
    )


def compute_grad_stats(parameters, prefix="grad"):
    grads = [p.grad.detach().flatten() for p in parameters if p.grad is not None]
    if len(grads) == 0:
        return {}

    grads = torch.cat(grads)
    return {
        f"{prefix}/l1_norm": grads.abs().sum().item(),
        f"{prefix}/l2_norm": grads.norm(2).item(),
        f"{prefix}/linf_norm": grads.abs().max().item(),
        f"{prefix}/mean": grads.mean().item(),
        f"{prefix}/std": grads.std().item(),
    }


def get_epoch_mean_loss(epoch_loss):
    epoch_mean_loss = {}
    for current_loss in epoch_loss:
        for key, value in current_loss.items():
            if key in epoch_mean_loss:
                epoch_mean_loss[key].append(
                    value if isinstance(value, (int, float)) else value.item()
                )
            else:
                epoch_mean_loss[key] = [value if isinstance(value, (int, float)) else value.item()]

    for key, values in epoch_mean_loss.items():
        epoch_mean_loss[key] = np.mean(np.array(values))

    return epoch_mean_loss


class Planner(nn.Module):
    def __init__(self, n_neighbors=4, past=10, future=16, hidden=256):
        super().__init__()
        self.future = future
        self.n = 1 + n_neighbors
        self.encoder = nn.Sequential(nn.Linear(past * 4 * self.n + 4, hidden), nn.ReLU(),
                                     nn.Linear(hidden, hidden), nn.ReLU())
        self.decoder = nn.Linear(hidden, self.n * future * 4)
        self.turn_head = nn.Linear(hidden, 3)

    def forward(self, inputs):
        B = inputs["ego_agent_past"].shape[0]
        past = torch.cat([inputs["ego_agent_past"][:, None], inputs["neighbor_agents_past"]], dim=1)
        h = self.encoder(torch.cat([past.reshape(B, -1), inputs["goal_pose"].reshape(B, -1)], dim=-1))
        return self.decoder(h).view(B, self.n, self.future, 4), self.turn_head(h)


def compute_training_loss(model, inputs, futures, args):
    ego_future, neighbors_future, neighbor_future_mask = futures
    prediction, turn_logits = model(inputs)
    neighbor_error = (prediction[:, 1:] - neighbors_future).pow(2).mean(-1)
    neighbor_error = neighbor_error.masked_fill(neighbor_future_mask, 0.0)
    turn = inputs["turn_indicator"]
    return {
        "neighbor_prediction_loss": neighbor_error.mean(),
        "ego_planning_loss": (prediction[:, 0] - ego_future).pow(2).mean(),
        "turn_indicator_loss": nn.functional.cross_entropy(turn_logits, turn),
        "turn_indicator_accuracy": (turn_logits.argmax(-1) == turn).float().mean(),
        "road_border_loss": prediction[:, 0, :, :2].abs().sub(3.0).relu().mean(),
        "neighbor_collision_loss": (1.0 - (prediction[:, :1, :, :2] - prediction[:, 1:, :, :2])
                                    .norm(dim=-1)).relu().mean(),
    }


class ModelEma:
    def __init__(self, model, decay=0.999):
        self.decay = decay
        self.shadow = [p.detach().clone() for p in model.parameters()]

    @torch.no_grad()
    def update(self, model):
        for s, p in zip(self.shadow, model.parameters()):
            s.mul_(self.decay).add_(p, alpha=1 - self.decay)


def train_epoch(data_loader, model, optimizer, args, ema, aug=None):
    epoch_loss = []

    model.train()

    for inputs in data_loader:
        inputs = {key: value.to(args.device) for key, value in inputs.items()}
        inputs["ego_agent_past"] = heading_to_cos_sin(inputs["ego_agent_past"])
        inputs["goal_pose"] = heading_to_cos_sin(inputs["goal_pose"])

        ego_future = inputs["ego_agent_future"]
        neighbors_future = inputs["neighbor_agents_future"]
        if aug is not None:
            inputs, ego_future, neighbors_future = aug(inputs, ego_future, neighbors_future)

        ego_future = heading_to_cos_sin(ego_future)

        mask = torch.sum(torch.ne(neighbors_future[..., :3], 0), dim=-1) == 0
        neighbors_future = heading_to_cos_sin(neighbors_future)
        neighbors_future[mask] = 0.0
        inputs = args.observation_normalizer(inputs)

        optimizer.zero_grad()

        loss = compute_training_loss(model, inputs, (ego_future, neighbors_future, mask), args)

        loss["loss"] = (
            args.alpha_neighbor_loss * loss["neighbor_prediction_loss"]
            + args.alpha_planning_loss * loss["ego_planning_loss"]
            + loss["turn_indicator_loss"]
            + args.coeff_road_border_loss * loss["road_border_loss"]
            + args.coeff_neighbor_collision_loss * loss["neighbor_collision_loss"]
        )

        loss["loss"].backward()

        loss.update(compute_grad_stats(model.parameters()))

        nn.utils.clip_grad_norm_(model.parameters(), 5)
        optimizer.step()

        ema.update(model)

        epoch_loss.append(loss)

    epoch_mean_loss = get_epoch_mean_loss(epoch_loss)

    print(f"{epoch_mean_loss['loss']=:.4f}")
    print(f"{epoch_mean_loss['turn_indicator_accuracy']=:.4f}")

    return epoch_mean_loss, epoch_mean_loss["loss"]


def make_batch(B=8, n=4, past=10, future=16):
    neighbors_future = torch.randn(B, n, future, 3)
    neighbors_future[:, -1] = 0.0
    return {"ego_agent_past": torch.randn(B, past, 3), "neighbor_agents_past": torch.randn(B, n, past, 4),
            "goal_pose": torch.randn(B, 1, 3), "ego_agent_future": torch.randn(B, future, 3),
            "neighbor_agents_future": neighbors_future, "turn_indicator": torch.randint(0, 3, (B,))}


torch.manual_seed(0)
args = SimpleNamespace(device="cpu", ddp=False, observation_normalizer=lambda inputs: inputs,
                       alpha_neighbor_loss=0.5, alpha_planning_loss=1.0, coeff_road_border_loss=0.1,
                       coeff_neighbor_collision_loss=0.1)
model = Planner()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
ema = ModelEma(model)
train_loader = [make_batch() for _ in range(25)]
for epoch in range(3):
    train_loss, train_total_loss = train_epoch(train_loader, model, optimizer, args, ema)
