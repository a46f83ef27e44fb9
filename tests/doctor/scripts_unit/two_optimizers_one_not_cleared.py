import torch
from torch import nn

torch.manual_seed(0)
gen = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 32))
critic = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))
opt_gen = torch.optim.Adam(gen.parameters(), lr=1e-3)
opt_critic = torch.optim.Adam(critic.parameters(), lr=1e-3)
for step in range(40):
    real = torch.randn(64, 32)
    fake = gen(torch.randn(64, 16))
    critic_loss = critic(fake.detach()).mean() - critic(real).mean()
    critic_loss.backward()  # adds to the critic's gradients: nothing clears them
    opt_critic.step()
    opt_gen.zero_grad()
    gen_loss = -critic(fake).mean()
    gen_loss.backward()
    opt_gen.step()
    if step % 10 == 0:
        print(step, round(critic_loss.item(), 4), round(gen_loss.item(), 4))
