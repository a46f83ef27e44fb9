# Source: https://github.com/oxwhirl/pymarl/pull/73
#   code: src/runners/episode_runner.py, src/controllers/basic_controller.py,
#   src/modules/agents/rnn_agent.py, src/components/action_selectors.py and
#   src/components/epsilon_schedules.py at commit c971afd (the PR's base)
# Adapted: the StarCraft II environment replaced by a small random environment (3 agents,
#   obs of 30, 5 actions, episodes of 40 steps); EpisodeBatch reduced to a dict of zero
#   tensors with update() and the one-hot preprocessing of actions; the Logger reduced to a
#   dict of lists; registries replaced by direct classes; args from a Namespace (the qmix
#   defaults: rnn_hidden_dim 64, epsilon 1.0 -> 0.05 over 50000 steps, obs_last_action,
#   obs_agent_id); cuda -> cpu; 6 training episodes run by the runner only (no learner).
from argparse import Namespace
from functools import partial

import numpy as np
import torch as th
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Categorical


class RandomEnv:
    def __init__(self, n_agents=3, obs_dim=30, n_actions=5, episode_limit=40):
        self.n_agents, self.obs_dim, self.n_actions = n_agents, obs_dim, n_actions
        self.episode_limit = episode_limit
        self.rng = np.random.RandomState(0)

    def reset(self):
        self.steps = 0

    def get_obs(self):
        return [self.rng.randn(self.obs_dim).astype(np.float32) for _ in range(self.n_agents)]

    def get_state(self):
        return self.rng.randn(self.obs_dim * self.n_agents).astype(np.float32)

    def get_avail_actions(self):
        return [[1] * self.n_actions for _ in range(self.n_agents)]

    def step(self, actions):
        self.steps += 1
        terminated = self.steps >= self.episode_limit
        return float(self.rng.rand()), terminated, {"episode_limit": terminated}


class EpisodeBatch:
    def __init__(self, scheme, groups, batch_size, max_seq_length, preprocess=None, device="cpu"):
        self.batch_size = batch_size
        self.device = device
        self.data = {}
        for k, v in scheme.items():
            vshape = v["vshape"] if isinstance(v["vshape"], tuple) else (v["vshape"],)
            shape = ((groups[v["group"]],) if "group" in v else ()) + vshape
            self.data[k] = th.zeros((batch_size, max_seq_length) + shape, dtype=v.get("dtype", th.float32))

    def update(self, data, ts):
        for k, v in data.items():
            v = v if isinstance(v, th.Tensor) else th.tensor(np.array(v))
            self.data[k][:, ts] = v.view_as(self.data[k][:, ts])
            if k == "actions":
                self.data["actions_onehot"][:, ts] = F.one_hot(v.view(-1), self.data["actions_onehot"].shape[-1]).float()

    def __getitem__(self, item):
        return self.data[item]


class DecayThenFlatSchedule():

    def __init__(self, start, finish, time_length, decay="exp"):
        self.start = start
        self.finish = finish
        self.time_length = time_length
        self.delta = (self.start - self.finish) / self.time_length
        self.decay = decay

    def eval(self, T):
        if self.decay in ["linear"]:
            return max(self.finish, self.start - self.delta * T)


class EpsilonGreedyActionSelector():

    def __init__(self, args):
        self.args = args

        self.schedule = DecayThenFlatSchedule(args.epsilon_start, args.epsilon_finish, args.epsilon_anneal_time,
                                              decay="linear")
        self.epsilon = self.schedule.eval(0)

    def select_action(self, agent_inputs, avail_actions, t_env, test_mode=False):

        # Assuming agent_inputs is a batch of Q-Values for each agent bav
        self.epsilon = self.schedule.eval(t_env)

        if test_mode:
            # Greedy action selection only
            self.epsilon = 0.0

        # mask actions that are excluded from selection
        masked_q_values = agent_inputs.clone()
        masked_q_values[avail_actions == 0.0] = -float("inf")  # should never be selected!

        random_numbers = th.rand_like(agent_inputs[:, :, 0])
        pick_random = (random_numbers < self.epsilon).long()
        random_actions = Categorical(avail_actions.float()).sample().long()

        picked_actions = pick_random * random_actions + (1 - pick_random) * masked_q_values.max(dim=2)[1]
        return picked_actions


class RNNAgent(nn.Module):
    def __init__(self, input_shape, args):
        super(RNNAgent, self).__init__()
        self.args = args

        self.fc1 = nn.Linear(input_shape, args.rnn_hidden_dim)
        self.rnn = nn.GRUCell(args.rnn_hidden_dim, args.rnn_hidden_dim)
        self.fc2 = nn.Linear(args.rnn_hidden_dim, args.n_actions)

    def init_hidden(self):
        # make hidden states on same device as model
        return self.fc1.weight.new(1, self.args.rnn_hidden_dim).zero_()

    def forward(self, inputs, hidden_state):
        x = F.relu(self.fc1(inputs))
        h_in = hidden_state.reshape(-1, self.args.rnn_hidden_dim)
        h = self.rnn(x, h_in)
        q = self.fc2(h)
        return q, h


# This multi-agent controller shares parameters between agents
class BasicMAC:
    def __init__(self, scheme, groups, args):
        self.n_agents = args.n_agents
        self.args = args
        input_shape = self._get_input_shape(scheme)
        self._build_agents(input_shape)
        self.agent_output_type = args.agent_output_type

        self.action_selector = EpsilonGreedyActionSelector(args)

        self.hidden_states = None

    def select_actions(self, ep_batch, t_ep, t_env, bs=slice(None), test_mode=False):
        # Only select actions for the selected batch elements in bs
        avail_actions = ep_batch["avail_actions"][:, t_ep]
        agent_outputs = self.forward(ep_batch, t_ep, test_mode=test_mode)
        chosen_actions = self.action_selector.select_action(agent_outputs[bs], avail_actions[bs], t_env, test_mode=test_mode)
        return chosen_actions

    def forward(self, ep_batch, t, test_mode=False):
        agent_inputs = self._build_inputs(ep_batch, t)
        avail_actions = ep_batch["avail_actions"][:, t]
        agent_outs, self.hidden_states = self.agent(agent_inputs, self.hidden_states)

        return agent_outs.view(ep_batch.batch_size, self.n_agents, -1)

    def init_hidden(self, batch_size):
        self.hidden_states = self.agent.init_hidden().unsqueeze(0).expand(batch_size, self.n_agents, -1)  # bav

    def _build_agents(self, input_shape):
        self.agent = RNNAgent(input_shape, self.args)

    def _build_inputs(self, batch, t):
        # Assumes homogenous agents with flat observations.
        # Other MACs might want to e.g. delegate building inputs to each agent
        bs = batch.batch_size
        inputs = []
        inputs.append(batch["obs"][:, t])  # b1av
        if self.args.obs_last_action:
            if t == 0:
                inputs.append(th.zeros_like(batch["actions_onehot"][:, t]))
            else:
                inputs.append(batch["actions_onehot"][:, t-1])
        if self.args.obs_agent_id:
            inputs.append(th.eye(self.n_agents, device=batch.device).unsqueeze(0).expand(bs, -1, -1))

        inputs = th.cat([x.reshape(bs*self.n_agents, -1) for x in inputs], dim=1)
        return inputs

    def _get_input_shape(self, scheme):
        input_shape = scheme["obs"]["vshape"]
        if self.args.obs_last_action:
            input_shape += scheme["actions_onehot"]["vshape"][0]
        if self.args.obs_agent_id:
            input_shape += self.n_agents

        return input_shape


class Logger:
    def __init__(self):
        self.stats = {}

    def log_stat(self, key, value, t):
        self.stats.setdefault(key, []).append((t, value))


class EpisodeRunner:

    def __init__(self, args, logger):
        self.args = args
        self.logger = logger
        self.batch_size = self.args.batch_size_run
        assert self.batch_size == 1

        self.env = RandomEnv(**self.args.env_args)
        self.episode_limit = self.env.episode_limit
        self.t = 0

        self.t_env = 0

        self.train_returns = []
        self.test_returns = []
        self.train_stats = {}
        self.test_stats = {}

        # Log the first run
        self.log_train_stats_t = -1000000

    def setup(self, scheme, groups, preprocess, mac):
        self.new_batch = partial(EpisodeBatch, scheme, groups, self.batch_size, self.episode_limit + 1,
                                 preprocess=preprocess, device=self.args.device)
        self.mac = mac

    def reset(self):
        self.batch = self.new_batch()
        self.env.reset()
        self.t = 0

    def run(self, test_mode=False):
        self.reset()

        terminated = False
        episode_return = 0
        self.mac.init_hidden(batch_size=self.batch_size)

        while not terminated:

            pre_transition_data = {
                "state": [self.env.get_state()],
                "avail_actions": [self.env.get_avail_actions()],
                "obs": [self.env.get_obs()]
            }

            self.batch.update(pre_transition_data, ts=self.t)

            # Pass the entire batch of experiences up till now to the agents
            # Receive the actions for each agent at this timestep in a batch of size 1
            actions = self.mac.select_actions(self.batch, t_ep=self.t, t_env=self.t_env, test_mode=test_mode)

            reward, terminated, env_info = self.env.step(actions[0])
            episode_return += reward

            post_transition_data = {
                "actions": actions,
                "reward": [(reward,)],
                "terminated": [(terminated != env_info.get("episode_limit", False),)],
            }

            self.batch.update(post_transition_data, ts=self.t)

            self.t += 1

        last_data = {
            "state": [self.env.get_state()],
            "avail_actions": [self.env.get_avail_actions()],
            "obs": [self.env.get_obs()]
        }
        self.batch.update(last_data, ts=self.t)

        # Select actions in the last stored state
        actions = self.mac.select_actions(self.batch, t_ep=self.t, t_env=self.t_env, test_mode=test_mode)
        self.batch.update({"actions": actions}, ts=self.t)

        cur_stats = self.test_stats if test_mode else self.train_stats
        cur_returns = self.test_returns if test_mode else self.train_returns
        log_prefix = "test_" if test_mode else ""
        cur_stats.update({k: cur_stats.get(k, 0) + env_info.get(k, 0) for k in set(cur_stats) | set(env_info)})
        cur_stats["n_episodes"] = 1 + cur_stats.get("n_episodes", 0)
        cur_stats["ep_length"] = self.t + cur_stats.get("ep_length", 0)

        if not test_mode:
            self.t_env += self.t

        cur_returns.append(episode_return)

        if test_mode and (len(self.test_returns) == self.args.test_nepisode):
            self._log(cur_returns, cur_stats, log_prefix)
        elif self.t_env - self.log_train_stats_t >= self.args.runner_log_interval:
            self._log(cur_returns, cur_stats, log_prefix)
            if hasattr(self.mac.action_selector, "epsilon"):
                self.logger.log_stat("epsilon", self.mac.action_selector.epsilon, self.t_env)
            self.log_train_stats_t = self.t_env

        return self.batch

    def _log(self, returns, stats, prefix):
        self.logger.log_stat(prefix + "return_mean", np.mean(returns), self.t_env)
        self.logger.log_stat(prefix + "return_std", np.std(returns), self.t_env)
        returns.clear()

        for k, v in stats.items():
            if k != "n_episodes":
                self.logger.log_stat(prefix + k + "_mean" , v/stats["n_episodes"], self.t_env)
        stats.clear()


if __name__ == "__main__":
    th.manual_seed(0)
    args = Namespace(n_agents=3, n_actions=5, rnn_hidden_dim=64, agent_output_type="q",
                     epsilon_start=1.0, epsilon_finish=0.05, epsilon_anneal_time=50000,
                     obs_last_action=True, obs_agent_id=True, batch_size_run=1, device="cpu",
                     env_args={"n_agents": 3, "obs_dim": 30, "n_actions": 5, "episode_limit": 40},
                     test_nepisode=1, runner_log_interval=80)
    scheme = {
        "state": {"vshape": 90},
        "obs": {"vshape": 30, "group": "agents"},
        "actions": {"vshape": (1,), "group": "agents", "dtype": th.long},
        "actions_onehot": {"vshape": (5,), "group": "agents"},
        "avail_actions": {"vshape": (5,), "group": "agents", "dtype": th.int},
        "reward": {"vshape": (1,)},
        "terminated": {"vshape": (1,), "dtype": th.uint8},
    }
    groups = {"agents": args.n_agents}
    logger = Logger()
    runner = EpisodeRunner(args, logger)
    mac = BasicMAC(scheme, groups, args)
    runner.setup(scheme=scheme, groups=groups, preprocess=None, mac=mac)
    for episode in range(6):
        episode_batch = runner.run(test_mode=False)
    print("t_env", runner.t_env, {k: v[-1] for k, v in logger.stats.items()})
