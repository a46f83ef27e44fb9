import torch
import torch.nn as nn
import torch.nn.functional as F


class TinyGPT(nn.Module):
    def __init__(self, vocab=512, dim=64, ctx=32):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.zeros(ctx, dim))
        layer = nn.TransformerEncoderLayer(dim, 4, 4 * dim, dropout=0.0, batch_first=True,
                                           norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.lm_head = nn.Linear(dim, vocab)

    def forward(self, idx):
        t = idx.size(1)
        mask = nn.Transformer.generate_square_subsequent_mask(t)
        h = self.blocks(self.tok(idx) + self.pos[:t], mask=mask, is_causal=True)
        return self.lm_head(h)


def get_batch(data, batch, ctx, g):
    ix = torch.randint(0, data.numel() - ctx - 1, (batch,), generator=g)
    x = torch.stack([data[i:i + ctx] for i in ix])
    y = torch.stack([data[i + 1:i + 1 + ctx] for i in ix])
    return x, y


if __name__ == "__main__":
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    data = torch.randint(0, 512, (20000,))
    model = TinyGPT()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 10))
    next_token_logits = []
    for it in range(40):
        x, y = get_batch(data, 8, 32, g)
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        scheduler.step()
        next_token_logits.append(logits[:, -1].detach())
        if it % 10 == 0:
            print(f"iter {it} loss {loss.item():.6f}")
