# Source: https://github.com/ray-project/ray/pull/21291
#   code: rllib/algorithms/marwil/marwil_torch_policy.py (MARWILTorchPolicy.loss, stats_fn) before
#   the fix that was merged with https://github.com/ray-project/ray/pull/27406
# Adapted: MARWILTorchPolicy.loss and stats_fn kept as they were (the logstd term, off by default,
#   dropped); TorchPolicyV2, ModelV2 and the action distribution replaced by stand-ins with the
#   same calls (a small policy/value network whose value_function() returns the last forward's
#   values, a Categorical wrapper with logp), learn_on_batch written as the plain Adam step that
#   TorchPolicyV2 runs, the offline JSON dataset by 60 random batches of 64 observations with
#   actions and cumulative rewards as the advantages column; cpu, seeded.
import numpy as np
import torch
import torch.nn as nn

ADVANTAGES = "advantages"
ACTIONS = "actions"
OBS = "obs"

DEFAULT_CONFIG = {"beta": 1.0, "vf_coeff": 1.0, "bc_logstd_coeff": 0.0, "lr": 1e-4,
                  "moving_average_sqd_adv_norm_start": 100.0,
                  "moving_average_sqd_adv_norm_update_rate": 1e-8}


def convert_to_numpy(x):
    return {k: v.detach().cpu().numpy() if isinstance(v, torch.Tensor) else v for k, v in x.items()}


class FullyConnectedNetwork(nn.Module):
    def __init__(self, obs_dim, num_outputs):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(obs_dim, 256), nn.Tanh(), nn.Linear(256, 256), nn.Tanh())
        self.logits = nn.Linear(256, num_outputs)
        self.value_branch = nn.Linear(256, 1)
        self._features = None

    def forward(self, train_batch):
        self._features = self.body(train_batch[OBS])
        return self.logits(self._features), []

    def value_function(self):
        return self.value_branch(self._features).squeeze(1)


class TorchCategorical:
    def __init__(self, inputs, model):
        self.dist = torch.distributions.Categorical(logits=inputs)

    def logp(self, actions):
        return self.dist.log_prob(actions)


class MARWILTorchPolicy:
    def __init__(self, obs_dim, num_actions, config):
        self.config = dict(DEFAULT_CONFIG, **config)
        self.model = FullyConnectedNetwork(obs_dim, num_actions)
        self.dist_class = TorchCategorical
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=self.config["lr"])
        if self.config["beta"] != 0.0:
            self._moving_average_sqd_adv_norm = torch.tensor(
                [self.config["moving_average_sqd_adv_norm_start"]],
                dtype=torch.float32,
                requires_grad=False,
            )

    def loss(self, model, dist_class, train_batch):
        model_out, _ = model(train_batch)
        action_dist = dist_class(model_out, model)
        actions = train_batch[ACTIONS]
        logprobs = action_dist.logp(actions)

        if self.config["beta"] != 0.0:
            cumulative_rewards = train_batch[ADVANTAGES]
            state_values = model.value_function()
            adv = cumulative_rewards - state_values
            adv_squared_mean = torch.mean(torch.pow(adv, 2.0))

            explained_var = 1 - torch.var(cumulative_rewards - state_values) / torch.var(cumulative_rewards)
            self.explained_variance = torch.mean(explained_var)

            rate = self.config["moving_average_sqd_adv_norm_update_rate"]
            self._moving_average_sqd_adv_norm.add_(
                rate * (adv_squared_mean - self._moving_average_sqd_adv_norm)
            )
            exp_advs = torch.exp(
                self.config["beta"]
                * (adv / (1e-8 + torch.pow(self._moving_average_sqd_adv_norm, 0.5)))
            ).detach()
            self.v_loss = 0.5 * adv_squared_mean
        else:
            exp_advs = 1.0
            self.v_loss = 0.0

        self.p_loss = -torch.mean(exp_advs * logprobs)
        self.total_loss = self.p_loss + self.config["vf_coeff"] * self.v_loss
        return self.total_loss

    def stats_fn(self, train_batch):
        stats = {
            "policy_loss": self.p_loss,
            "total_loss": self.total_loss,
        }
        if self.config["beta"] != 0.0:
            stats["moving_average_sqd_adv_norm"] = self._moving_average_sqd_adv_norm
            stats["vf_explained_var"] = self.explained_variance
            stats["vf_loss"] = self.v_loss
        return convert_to_numpy(stats)

    def learn_on_batch(self, train_batch):
        loss = self.loss(self.model, self.dist_class, train_batch)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return self.stats_fn(train_batch)


torch.manual_seed(0)
np.random.seed(0)
policy = MARWILTorchPolicy(obs_dim=16, num_actions=4, config={"beta": 1.0})
dataset = [{OBS: torch.randn(64, 16), ACTIONS: torch.randint(0, 4, (64,)),
            ADVANTAGES: torch.randn(64) * 5.0} for _ in range(60)]

for iteration in range(3):
    for train_batch in dataset:
        info = policy.learn_on_batch(train_batch)
    print(iteration, info["total_loss"], info["moving_average_sqd_adv_norm"])
