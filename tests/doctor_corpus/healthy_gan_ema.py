import copy

import torch
import torch.nn as nn


@torch.no_grad()
def update_ema(ema, model, decay=0.99):
    for e, p in zip(ema.parameters(), model.parameters()):
        e.mul_(decay).add_(p, alpha=1 - decay)


def main(iters=20, batch=128, z_dim=32):
    torch.manual_seed(0)
    G = nn.Sequential(nn.Linear(z_dim, 256), nn.ReLU(), nn.Linear(256, 64))
    D = nn.Sequential(nn.Linear(64, 256), nn.LeakyReLU(0.2), nn.Linear(256, 1))
    G_ema = copy.deepcopy(G).requires_grad_(False)
    opt_g = torch.optim.Adam(G.parameters(), 2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(D.parameters(), 2e-4, betas=(0.5, 0.999))
    bce = nn.BCEWithLogitsLoss()
    ones, zeros = torch.ones(batch, 1), torch.zeros(batch, 1)
    d_losses = []
    for it in range(iters):
        real = torch.randn(batch, 64) * 0.5 + 1.0
        fake = G(torch.randn(batch, z_dim))
        d_loss = bce(D(real), ones) + bce(D(fake.detach()), zeros)
        opt_d.zero_grad()
        d_loss.backward()
        opt_d.step()
        g_loss = bce(D(fake), ones)
        opt_g.zero_grad()
        g_loss.backward()
        opt_g.step()
        update_ema(G_ema, G)
        d_losses.append(d_loss.item())
        if it % 5 == 0:
            print(f"iter {it} d {d_loss.item():.6f} g {g_loss.item():.6f}")


if __name__ == "__main__":
    main()
