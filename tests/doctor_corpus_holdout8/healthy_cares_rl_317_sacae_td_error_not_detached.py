# Source: https://github.com/UoA-CARES/cares_reinforcement_learning/pull/317
#   code: cares_reinforcement_learning/algorithm/policy/SACAE.py at 952fa13^, before the pull
#   request detached q_values_one/two in the TD errors used as PER priorities
# Adapted: SACAE's _update_critic, _update_actor_alpha, _update_autoencoder and train_policy
#   kept as they are (comments and blank lines inside them dropped, statements that fit on
#   one line joined); __init__ reduced to the fields they use, with a config namespace; the
#   Actor, Critic, Decoder, AELoss and helpers (evaluating, soft_update_params,
#   sample_image_batch_to_tensors) written small with the same interfaces: a conv encoder of
#   3x32x32 images, a tanh-Gaussian actor, twin Q heads, a prioritized memory stub that samples
#   random transitions and stores the priorities; 120 training steps of batch 32, cpu, seeded.
import contextlib
import copy
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


class Encoder(nn.Module):

    def __init__(self, latent=32):
        super().__init__()
        self.convs = nn.Sequential(nn.Conv2d(3, 16, 3, 2), nn.ReLU(), nn.Conv2d(16, 16, 3, 2), nn.ReLU(),
                                   nn.Flatten())
        self.fc = nn.Sequential(nn.Linear(16 * 7 * 7, latent), nn.LayerNorm(latent))

    def forward(self, image, detach=False):
        h = self.convs(image)
        if detach:
            h = h.detach()
        return torch.tanh(self.fc(h))

    def copy_conv_weights_from(self, source):
        for a, b in zip(self.convs, source.convs):
            if isinstance(a, nn.Conv2d):
                a.weight, a.bias = b.weight, b.bias


class Actor(nn.Module):

    def __init__(self, num_actions=4, latent=32):
        super().__init__()
        self.num_actions = num_actions
        self.encoder = Encoder(latent)
        self.act_net = nn.Sequential(nn.Linear(latent + 5, 128), nn.ReLU(), nn.Linear(128, 2 * num_actions))

    def forward(self, state, detach_encoder=False):
        h = torch.cat([self.encoder(state["image"], detach=detach_encoder), state["vector"]], dim=1)
        mu, log_std = self.act_net(h).chunk(2, dim=-1)
        std = log_std.clamp(-10, 2).exp()
        x = mu + std * torch.randn_like(mu)
        log_pi = (-0.5 * ((x - mu) / std).pow(2) - std.log()).sum(-1, keepdim=True)
        pi = torch.tanh(x)
        log_pi = log_pi - torch.log(1 - pi.pow(2) + 1e-6).sum(-1, keepdim=True)
        return pi, log_pi, torch.tanh(mu)


class Critic(nn.Module):

    def __init__(self, num_actions=4, latent=32):
        super().__init__()
        self.encoder = Encoder(latent)
        self.critic = nn.Module()
        self.critic.Q1 = nn.Sequential(nn.Linear(latent + 5 + num_actions, 128), nn.ReLU(), nn.Linear(128, 1))
        self.critic.Q2 = nn.Sequential(nn.Linear(latent + 5 + num_actions, 128), nn.ReLU(), nn.Linear(128, 1))

    def forward(self, state, action, detach_encoder=False):
        h = torch.cat([self.encoder(state["image"], detach=detach_encoder), state["vector"], action], dim=1)
        return self.critic.Q1(h), self.critic.Q2(h)


class Decoder(nn.Module):

    def __init__(self, latent=32):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(latent, 3 * 32 * 32), nn.Unflatten(1, (3, 32, 32)))

    def forward(self, latent):
        return self.net(latent)


class AELoss:

    def __init__(self, latent_lambda):
        self.latent_lambda = latent_lambda

    def calculate_loss(self, data, reconstructed_data, latent_sample):
        latent_loss = (0.5 * latent_sample.pow(2).sum(1)).mean()
        return F.mse_loss(reconstructed_data, data) + self.latent_lambda * latent_loss


@contextlib.contextmanager
def evaluating(net):
    was_training = net.training
    net.eval()
    try:
        yield net
    finally:
        net.train(was_training)


def soft_update_params(net, target_net, tau):
    for param, target_param in zip(net.parameters(), target_net.parameters()):
        target_param.data.copy_(tau * param.data + (1 - tau) * target_param.data)


class PrioritizedMemory:

    def __init__(self, size=5000):
        self.priorities = np.ones(size)

    def sample(self, batch_size):
        indices = np.random.randint(0, len(self.priorities), batch_size)
        states = {"image": torch.rand(batch_size, 3, 32, 32), "vector": torch.randn(batch_size, 5)}
        next_states = {"image": torch.rand(batch_size, 3, 32, 32), "vector": torch.randn(batch_size, 5)}
        return (states, torch.rand(batch_size, 4) * 2 - 1, torch.randn(batch_size, 1), next_states,
                torch.zeros(batch_size, 1), torch.ones(batch_size, 1), indices)

    def update_priorities(self, indices, priorities):
        self.priorities[indices] = priorities


def sample_image_batch_to_tensors(memory, batch_size, device, use_per_buffer, per_sampling_strategy,
                                  per_weight_normalisation):
    return memory.sample(batch_size)


class SACAE:

    def __init__(self, actor_network, critic_network, decoder_network, config, device):
        self.device = device
        self.actor_net = actor_network.to(device)
        self.critic_net = critic_network.to(device)
        self.target_critic_net = copy.deepcopy(self.critic_net).to(device)
        self.target_critic_net.eval()
        self.actor_net.encoder.copy_conv_weights_from(self.critic_net.encoder)
        self.encoder_tau = config.encoder_tau
        self.decoder_net = decoder_network.to(device)
        self.decoder_update_freq = config.decoder_update_freq
        self.gamma = config.gamma
        self.tau = config.tau
        self.reward_scale = config.reward_scale
        self.use_per_buffer = config.use_per_buffer
        self.per_sampling_strategy = config.per_sampling_strategy
        self.per_weight_normalisation = config.per_weight_normalisation
        self.per_alpha = config.per_alpha
        self.min_priority = config.min_priority
        self.learn_counter = 0
        self.policy_update_freq = config.policy_update_freq
        self.target_update_freq = config.target_update_freq
        self.target_entropy = -self.actor_net.num_actions
        self.actor_net_optimiser = torch.optim.Adam(self.actor_net.parameters(), lr=config.actor_lr)
        self.critic_net_optimiser = torch.optim.Adam(self.critic_net.parameters(), lr=config.critic_lr)
        self.ae_loss_function = AELoss(latent_lambda=config.latent_lambda)
        self.encoder_net_optimiser = torch.optim.Adam(self.critic_net.encoder.parameters(), lr=1e-3)
        self.decoder_net_optimiser = torch.optim.Adam(self.decoder_net.parameters(), lr=1e-3)
        self.log_alpha = torch.tensor(np.log(config.init_temperature)).to(device)
        self.log_alpha.requires_grad = True
        self.log_alpha_optimizer = torch.optim.Adam([self.log_alpha], lr=config.alpha_lr)

    @property
    def alpha(self) -> torch.Tensor:
        return self.log_alpha.exp()

    def _update_critic(
        self,
        states: dict[str, torch.Tensor],
        actions: torch.Tensor,
        rewards: torch.Tensor,
        next_states: dict[str, torch.Tensor],
        dones: torch.Tensor,
        weights: torch.Tensor,
    ) -> tuple[dict[str, Any], np.ndarray]:
        with torch.no_grad():
            with evaluating(self.actor_net):
                next_actions, next_log_pi, _ = self.actor_net(next_states)
            target_q_values_one, target_q_values_two = self.target_critic_net(next_states, next_actions)
            target_q_values = (
                torch.minimum(target_q_values_one, target_q_values_two)
                - self.alpha.detach() * next_log_pi
            )
            q_target = (rewards * self.reward_scale + self.gamma * (1 - dones) * target_q_values)
        q_values_one, q_values_two = self.critic_net(states, actions)
        td_error_one = (q_values_one - q_target).abs()
        td_error_two = (q_values_two - q_target).abs()
        critic_loss_one = F.mse_loss(q_values_one, q_target, reduction="none")
        critic_loss_one = (critic_loss_one * weights).mean()
        critic_loss_two = F.mse_loss(q_values_two, q_target, reduction="none")
        critic_loss_two = (critic_loss_two * weights).mean()
        critic_loss_total = critic_loss_one + critic_loss_two
        self.critic_net_optimiser.zero_grad()
        critic_loss_total.backward()
        self.critic_net_optimiser.step()
        priorities = (
            torch.max(td_error_one, td_error_two)
            .clamp(self.min_priority)
            .pow(self.per_alpha)
            .cpu()
            .data.numpy()
            .flatten()
        )
        info = {
            "critic_loss_one": critic_loss_one.item(),
            "critic_loss_two": critic_loss_two.item(),
            "critic_loss_total": critic_loss_total.item(),
        }
        return info, priorities

    def _update_actor_alpha(self, states: dict[str, torch.Tensor]) -> dict[str, Any]:
        pi, log_pi, _ = self.actor_net(states, detach_encoder=True)
        with evaluating(self.critic_net):
            qf1_pi, qf2_pi = self.critic_net(states, pi, detach_encoder=True)
        min_qf_pi = torch.minimum(qf1_pi, qf2_pi)
        actor_loss = ((self.alpha.detach() * log_pi) - min_qf_pi).mean()
        self.actor_net_optimiser.zero_grad()
        actor_loss.backward()
        self.actor_net_optimiser.step()
        alpha_loss = -(self.log_alpha * (log_pi + self.target_entropy).detach()).mean()
        self.log_alpha_optimizer.zero_grad()
        alpha_loss.backward()
        self.log_alpha_optimizer.step()
        info = {"actor_loss": actor_loss.item(), "alpha_loss": alpha_loss.item()}
        return info

    def _update_autoencoder(self, states: torch.Tensor) -> dict[str, Any]:
        latent_samples = self.critic_net.encoder(states)
        reconstructed_data = self.decoder_net(latent_samples)
        ae_loss = self.ae_loss_function.calculate_loss(
            data=states,
            reconstructed_data=reconstructed_data,
            latent_sample=latent_samples,
        )
        self.encoder_net_optimiser.zero_grad()
        self.decoder_net_optimiser.zero_grad()
        ae_loss.backward()
        self.encoder_net_optimiser.step()
        self.decoder_net_optimiser.step()
        info = {"ae_loss": ae_loss.item()}
        return info

    def train_policy(self, training_context) -> dict[str, Any]:
        self.learn_counter += 1
        memory = training_context.memory
        batch_size = training_context.batch_size
        (
            states_tensor,
            actions_tensor,
            rewards_tensor,
            next_states_tensor,
            dones_tensor,
            weights_tensor,
            indices,
        ) = sample_image_batch_to_tensors(
            memory,
            batch_size,
            self.device,
            use_per_buffer=self.use_per_buffer,
            per_sampling_strategy=self.per_sampling_strategy,
            per_weight_normalisation=self.per_weight_normalisation,
        )
        info: dict[str, Any] = {}
        critic_info, priorities = self._update_critic(
            states_tensor,
            actions_tensor,
            rewards_tensor,
            next_states_tensor,
            dones_tensor,
            weights_tensor,
        )
        info |= critic_info
        if self.learn_counter % self.policy_update_freq == 0:
            actor_info = self._update_actor_alpha(states_tensor)
            info |= actor_info
            info["alpha"] = self.alpha.item()
        if self.learn_counter % self.target_update_freq == 0:
            soft_update_params(self.critic_net.critic.Q1, self.target_critic_net.critic.Q1, self.tau)
            soft_update_params(self.critic_net.critic.Q2, self.target_critic_net.critic.Q2, self.tau)
            soft_update_params(
                self.critic_net.encoder,
                self.target_critic_net.encoder,
                self.encoder_tau,
            )
        if self.learn_counter % self.decoder_update_freq == 0:
            ae_info = self._update_autoencoder(states_tensor["image"])
            info |= ae_info
        if self.use_per_buffer:
            memory.update_priorities(indices, priorities)
        return info


torch.manual_seed(0)
np.random.seed(0)
config = SimpleNamespace(encoder_tau=0.05, decoder_update_freq=1, gamma=0.99, tau=0.01, reward_scale=1.0,
                         use_per_buffer=1, per_sampling_strategy="stratified", per_weight_normalisation="batch",
                         per_alpha=0.6, min_priority=1e-6, policy_update_freq=2, target_update_freq=2,
                         actor_lr=1e-4, critic_lr=1e-3, alpha_lr=1e-4, latent_lambda=1e-6, init_temperature=0.1)
agent = SACAE(Actor(), Critic(), Decoder(), config, torch.device("cpu"))
training_context = SimpleNamespace(memory=PrioritizedMemory(), batch_size=32)
for step in range(120):
    info = agent.train_policy(training_context)
    if step % 40 == 0:
        print(step, {k: round(v, 4) for k, v in info.items()})
