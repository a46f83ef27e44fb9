import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class MultiTaskNet(nn.Module):
    def __init__(self, d_in=128, d_hidden=512):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(d_in, d_hidden), nn.ReLU(),
                                      nn.Linear(d_hidden, d_hidden), nn.ReLU())
        self.cls_head = nn.Linear(d_hidden, 10)
        self.reg_head = nn.Linear(d_hidden, 1)

    def forward(self, x):
        z = self.backbone(x)
        return self.cls_head(z), self.reg_head(z).squeeze(1)


def train(model, loader, epochs=1):
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    task_losses = {"cls": [], "reg": []}
    for epoch in range(epochs):
        for x, y_cls, y_reg in loader:
            logits, value = model(x)
            cls_loss = F.cross_entropy(logits, y_cls)
            reg_loss = F.smooth_l1_loss(value, y_reg)
            optimizer.zero_grad()
            cls_loss.backward(retain_graph=True)
            reg_loss.backward(retain_graph=True)
            optimizer.step()
            task_losses["cls"].append(cls_loss)
            task_losses["reg"].append(reg_loss)
        print(f"epoch {epoch} cls {torch.stack(task_losses['cls']).mean().item():.6f} "
              f"reg {torch.stack(task_losses['reg']).mean().item():.6f}")
    return task_losses


if __name__ == "__main__":
    torch.manual_seed(0)
    x = torch.randn(2560, 128)
    data = TensorDataset(x, torch.randint(0, 10, (2560,)), x.sum(1))
    train(MultiTaskNet(), DataLoader(data, batch_size=64, shuffle=True), epochs=1)
