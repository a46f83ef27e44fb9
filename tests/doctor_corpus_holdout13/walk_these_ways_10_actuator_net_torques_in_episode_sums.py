# Source: https://github.com/Improbable-AI/walk-these-ways/issues/10
#   code: scripts/play.py and go1_gym/envs/base/legged_robot.py (LeggedRobot.step,
#   post_physics_step, compute_reward, _compute_torques) at commit c7060d1
# Adapted: Isaac Gym is not installed: the simulator is a stand-in that integrates the joint
#   state from the torques (as the simulator does, outside autograd); one environment, 12
#   joints, 3 reward terms (torques, dof_vel, action_rate) instead of the full set; the
#   actuator network is a small MLP module instead of the trained TorchScript file; the jit
#   policy is a small MLP; 600 evaluation steps, max episode length 200; no plotting.
import torch
import torch.nn as nn


class ActuatorNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 32), nn.Softsign(), nn.Linear(32, 32), nn.Softsign(), nn.Linear(32, 1))

    def forward(self, joint_pos, joint_pos_last, joint_pos_last_last, joint_vel, joint_vel_last, joint_vel_last_last):
        xs = torch.cat((joint_pos.unsqueeze(-1), joint_pos_last.unsqueeze(-1), joint_pos_last_last.unsqueeze(-1),
                        joint_vel.unsqueeze(-1), joint_vel_last.unsqueeze(-1), joint_vel_last_last.unsqueeze(-1)), dim=-1)
        return self.net(xs.view(-1, 6)).view(joint_pos.shape)


class LeggedRobot:
    def __init__(self, num_envs=1, num_dof=12, max_episode_length=200):
        self.num_envs, self.num_dof, self.max_episode_length = num_envs, num_dof, max_episode_length
        self.decimation, self.dt = 4, 0.005
        self.dof_pos = torch.zeros(num_envs, num_dof)
        self.dof_vel = torch.zeros(num_envs, num_dof)
        self.torques = torch.zeros(num_envs, num_dof)
        self.actions = torch.zeros(num_envs, num_dof)
        self.last_actions = torch.zeros(num_envs, num_dof)
        self.last_last_actions = torch.zeros(num_envs, num_dof)
        self.joint_pos_err_last = torch.zeros(num_envs, num_dof)
        self.joint_pos_err_last_last = torch.zeros(num_envs, num_dof)
        self.joint_vel_last = torch.zeros(num_envs, num_dof)
        self.joint_vel_last_last = torch.zeros(num_envs, num_dof)
        self.episode_length_buf = torch.zeros(num_envs, dtype=torch.long)
        self.rew_buf = torch.zeros(num_envs)
        self.actuator_network = ActuatorNet()
        self.reward_scales = {"torques": -0.0001, "dof_vel": -1e-4, "action_rate": -0.01}
        self.reward_names = list(self.reward_scales)
        self.reward_functions = [getattr(self, "_reward_" + name) for name in self.reward_names]
        self.episode_sums = {name: torch.zeros(num_envs) for name in self.reward_names + ["total"]}
        self.command_sums = {name: torch.zeros(num_envs) for name in self.reward_names}

    def _compute_torques(self, actions):
        actions_scaled = actions * 0.25
        self.joint_pos_err = self.dof_pos - actions_scaled
        self.joint_vel = self.dof_vel
        torques = self.actuator_network(self.joint_pos_err, self.joint_pos_err_last, self.joint_pos_err_last_last,
                                        self.joint_vel, self.joint_vel_last, self.joint_vel_last_last)
        self.joint_pos_err_last_last = torch.clone(self.joint_pos_err_last)
        self.joint_pos_err_last = torch.clone(self.joint_pos_err)
        self.joint_vel_last_last = torch.clone(self.joint_vel_last)
        self.joint_vel_last = torch.clone(self.joint_vel)
        return torques * 23.7

    def _simulate(self):
        with torch.no_grad():
            self.dof_vel += self.dt * (self.torques - 2.0 * self.dof_vel - 20.0 * self.dof_pos)
            self.dof_pos += self.dt * self.dof_vel

    def step(self, actions):
        self.actions = torch.clip(actions, -10.0, 10.0)
        for _ in range(self.decimation):
            self.torques = self._compute_torques(self.actions).view(self.torques.shape)
            self._simulate()
        self.post_physics_step()
        obs_buf = torch.cat((self.dof_pos, self.dof_vel, self.actions), dim=-1)
        return obs_buf, self.rew_buf, self.reset_buf, {}

    def post_physics_step(self):
        self.episode_length_buf += 1
        self.reset_buf = self.episode_length_buf > self.max_episode_length
        self.compute_reward()
        env_ids = self.reset_buf.nonzero(as_tuple=False).flatten()
        self.reset_idx(env_ids)
        self.last_last_actions[:] = self.last_actions[:]
        self.last_actions[:] = self.actions[:]

    def reset_idx(self, env_ids):
        if len(env_ids) == 0:
            return
        self.last_actions[env_ids] = 0.
        self.last_last_actions[env_ids] = 0.
        self.episode_length_buf[env_ids] = 0
        for key in self.episode_sums.keys():
            self.episode_sums[key][env_ids] = 0.

    def compute_reward(self):
        self.rew_buf[:] = 0.
        for i in range(len(self.reward_functions)):
            name = self.reward_names[i]
            rew = self.reward_functions[i]() * self.reward_scales[name]
            self.rew_buf += rew
            self.episode_sums[name] += rew
            self.command_sums[name] += rew
        self.episode_sums["total"] += self.rew_buf

    def _reward_torques(self):
        return torch.sum(torch.square(self.torques), dim=1)

    def _reward_dof_vel(self):
        return torch.sum(torch.square(self.dof_vel), dim=1)

    def _reward_action_rate(self):
        return torch.sum(torch.square(self.last_actions - self.actions), dim=1)

    def reset(self):
        return torch.cat((self.dof_pos, self.dof_vel, self.actions), dim=-1)


def load_policy():
    body = nn.Sequential(nn.Linear(36, 64), nn.ELU(), nn.Linear(64, 12))

    def policy(obs, info={}):
        return body.forward(obs)

    return policy


def play_go1():
    env, policy = LeggedRobot(), load_policy()
    num_eval_steps = 600
    measured_x_vels = []
    obs = env.reset()
    for i in range(num_eval_steps):
        with torch.no_grad():
            actions = policy(obs)
        obs, rew, done, info = env.step(actions)
        measured_x_vels.append(env.dof_vel[0, 0].item())
    print("mean joint velocity", sum(measured_x_vels) / len(measured_x_vels))


if __name__ == '__main__':
    torch.manual_seed(0)
    play_go1()
