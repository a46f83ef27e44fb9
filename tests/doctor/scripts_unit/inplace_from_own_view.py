import torch
from torch import nn

torch.manual_seed(0)
critic = nn.Linear(32, 64)
policy = nn.Linear(32, 64)
opt = torch.optim.Adam(list(critic.parameters()) + list(policy.parameters()), lr=1e-3)
for episode in range(30):
    obs = torch.randn(16, 32)
    q = critic(obs)
    pi = policy(obs).softmax(-1)
    target = q.clone()
    for t in range(15):
        target[t] = 0.5 + 0.9 * (pi[t + 1] * target[t + 1, :])
    loss = (q - target.detach()).pow(2).mean() - pi.log().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"{loss.item():.6f}")
