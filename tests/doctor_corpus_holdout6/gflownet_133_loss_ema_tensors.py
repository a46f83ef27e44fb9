# Source: https://github.com/alexhernandezgarcia/gflownet/pull/133
# Adapted: GFlowNetAgent.train of gflownet/gflownet.py at the parent of the pull request's
#   commit (5c73856), cut to the training step and the moving average of the loss used for
#   early stopping (no test, buffer, logger or checkpoints); the environment, sample_batch
#   and trajectorybalance_loss are reduced to the same interface: random trajectories of 8
#   steps in a 16-dimensional state space with 5 actions, forward and backward policy MLPs,
#   a learned logZ, and the trajectory-balance loss returned as (loss, loss, loss) as in the
#   original; 300 iterations, batch of 16 trajectories, cpu, seeded.
import time

import torch
from torch import nn

torch.manual_seed(0)


class GFlowNetAgent:
    def __init__(self, n_train_steps=300, batch_size=16, ema_alpha=0.5, early_stopping=0.0,
                 state_dim=16, n_actions=5, traj_len=8):
        self.n_train_steps = n_train_steps
        self.batch_size = batch_size
        self.ema_alpha = ema_alpha
        self.early_stopping = early_stopping
        self.clip_grad_norm = 1.0
        self.sttr = 1
        self.ttsr = 1
        self.loss = "trajectorybalance"
        self.state_dim, self.n_actions, self.traj_len = state_dim, n_actions, traj_len
        self.forward_policy = nn.Sequential(nn.Linear(state_dim, 128), nn.LeakyReLU(), nn.Linear(128, n_actions))
        self.backward_policy = nn.Sequential(nn.Linear(state_dim, 128), nn.LeakyReLU(), nn.Linear(128, n_actions))
        self.logZ = nn.Parameter(torch.zeros(16))
        self.opt = torch.optim.Adam(self.parameters(), lr=1e-3)
        self.lr_scheduler = torch.optim.lr_scheduler.StepLR(self.opt, step_size=100, gamma=0.5)

    def parameters(self):
        return [*self.forward_policy.parameters(), *self.backward_policy.parameters(), self.logZ]

    def sample_batch(self, envs):
        times = {}
        states = torch.rand(self.batch_size, self.traj_len + 1, self.state_dim)
        actions = torch.randint(0, self.n_actions, (self.batch_size, self.traj_len))
        return [(states, actions)], times

    def trajectorybalance_loss(self, it, batch, loginf=1000):
        states, actions = batch[0]
        rewards = torch.rand(self.batch_size) + 0.1
        logits_f = self.forward_policy(states[:, :-1])
        logprobs_f = torch.log_softmax(logits_f, -1).gather(-1, actions[..., None]).squeeze(-1)
        sumlogprobs_f = logprobs_f.sum(1)
        logits_b = self.backward_policy(states[:, 1:])
        logprobs_b = torch.log_softmax(logits_b, -1).gather(-1, actions[..., None]).squeeze(-1)
        sumlogprobs_b = logprobs_b.sum(1)
        # Trajectory balance loss
        loss = (
            (self.logZ.sum() + sumlogprobs_f - sumlogprobs_b - torch.log(rewards))
            .pow(2)
            .mean()
        )
        return (loss, loss, loss), rewards

    def train(self):
        # Metrics
        all_losses = []
        loss_term_ema = None
        loss_flow_ema = None
        envs = [None for _ in range(self.batch_size)]
        # Train loop
        for it in range(1, self.n_train_steps + 1):
            t0_iter = time.time()
            data = []
            for j in range(self.sttr):
                batch, times = self.sample_batch(envs)
                data += batch
            for j in range(self.ttsr):
                if self.loss == "trajectorybalance":
                    losses, rewards = self.trajectorybalance_loss(
                        it * self.ttsr + j, data
                    )  # returns (opt loss, *metrics)
                else:
                    print("Unknown loss!")
                if not all([torch.isfinite(loss) for loss in losses]):
                    if len(all_losses) > 0:
                        all_losses.append([loss for loss in all_losses[-1]])
                else:
                    losses[0].backward()
                    if self.clip_grad_norm > 0:
                        torch.nn.utils.clip_grad_norm_(
                            self.parameters(), self.clip_grad_norm
                        )
                    self.opt.step()
                    self.lr_scheduler.step()
                    self.opt.zero_grad()
                    all_losses.append([i.item() for i in losses])

            # Moving average of the loss for early stopping
            if loss_term_ema and loss_flow_ema:
                loss_term_ema = (
                    self.ema_alpha * losses[1] + (1.0 - self.ema_alpha) * loss_term_ema
                )
                loss_flow_ema = (
                    self.ema_alpha * losses[2] + (1.0 - self.ema_alpha) * loss_flow_ema
                )
                if (
                    loss_term_ema < self.early_stopping
                    and loss_flow_ema < self.early_stopping
                ):
                    break
            else:
                loss_term_ema = losses[1]
                loss_flow_ema = losses[2]
            # Log times
            t1_iter = time.time()
            times.update({"iter": t1_iter - t0_iter})
            if it % 100 == 0:
                print(it, all_losses[-1][0])


if __name__ == "__main__":
    GFlowNetAgent().train()
