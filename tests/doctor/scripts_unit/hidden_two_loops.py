import torch
from torch import nn


def sample(cell, embed, prompt, length):
    h = torch.zeros(1, 128)
    for token in prompt[:-1]:  # warm the state up on the prompt
        h = cell(embed(token.view(1)), h)
    token = prompt[-1]
    text = []
    for _ in range(length):  # grad enabled: every state links to the one before
        h = cell(embed(token.view(1)), h)
        token = torch.multinomial(h.softmax(-1)[0, :32], 1)[0]
        text.append(int(token))
    return text


def main():
    torch.manual_seed(0)
    cell, embed = nn.GRUCell(64, 128), nn.Embedding(32, 64)
    prompt = torch.randint(0, 32, (4,))
    print(len(sample(cell, embed, prompt, 300)))


if __name__ == "__main__":
    main()
