import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


def main():
    torch.manual_seed(0)
    device = "cuda"
    data = TensorDataset(torch.randn(4096, 1024), torch.randint(0, 100, (4096,)))
    loader = DataLoader(data, batch_size=64, shuffle=True, pin_memory=True)
    model = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(),
                          nn.Linear(4096, 100)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    for step, (x, y) in enumerate(loader):
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        del x, y
        torch.cuda.empty_cache()
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
