import numpy as np
import torch
from torch import nn


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 32))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    history = {"loss": [], "recon": []}
    for step in range(40):
        x = torch.randn(128, 32)
        out = model(x)
        loss = (out - x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        history["loss"].append(loss.item())
        history["recon"].append(out.detach().numpy().copy())
    print(f"{np.mean(history['loss']):.6f}")


if __name__ == "__main__":
    main()
