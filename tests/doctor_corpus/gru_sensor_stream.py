import torch
import torch.nn as nn
import torch.nn.functional as F


class StreamingGRU(nn.Module):
    def __init__(self, n_features=32, hidden=128, n_out=4):
        super().__init__()
        self.cell = nn.GRUCell(n_features, hidden)
        self.readout = nn.Linear(hidden, n_out)

    def forward(self, chunk, h):
        outputs = []
        for t in range(chunk.size(1)):
            h = self.cell(chunk[:, t], h)
            outputs.append(self.readout(h))
        return torch.stack(outputs, dim=1), h


def sensor_chunks(n_chunks, batch=64, length=2, n_features=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    for _ in range(n_chunks):
        x = torch.randn(batch, length, n_features, generator=g)
        y = x[..., :4].cumsum(dim=1).tanh()
        yield x, y


def finetune_readout(model, n_chunks=25):
    opt = torch.optim.Adam(model.readout.parameters(), lr=1e-3)
    h = torch.zeros(64, 128)
    for step, (x, y) in enumerate(sensor_chunks(n_chunks)):
        pred, h = model(x, h)
        loss = F.mse_loss(pred, y)
        opt.zero_grad()
        loss.backward(retain_graph=True)
        opt.step()
        if step % 10 == 0:
            print(f"chunk {step} mse {loss.item():.6f}")
    return model


if __name__ == "__main__":
    torch.manual_seed(0)
    model = StreamingGRU()
    model.cell.load_state_dict(torch.nn.GRUCell(32, 128).state_dict())
    finetune_readout(model)
