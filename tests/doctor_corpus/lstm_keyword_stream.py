"""Run a keyword-spotting LSTM over a long feature stream, chunk by chunk."""

import argparse

import torch
import torch.nn as nn


class KeywordSpotter(nn.Module):
    def __init__(self, n_mels=40, hidden=128, n_keywords=12):
        super().__init__()
        self.lstm = nn.LSTM(n_mels, hidden, num_layers=1, batch_first=True)
        self.classifier = nn.Linear(hidden, n_keywords)

    def forward(self, features, state=None):
        out, state = self.lstm(features, state)
        return self.classifier(out), state


def feature_stream(n_chunks, batch, chunk_len, n_mels, seed=0):
    g = torch.Generator().manual_seed(seed)
    for _ in range(n_chunks):
        yield torch.randn(batch, chunk_len, n_mels, generator=g)


def spot(model, stream, threshold=0.5):
    detections = []
    state = None
    for i, chunk in enumerate(stream):
        logits, state = model(chunk, state)
        probs = logits[:, -1].softmax(dim=-1)
        score, keyword = probs.max(dim=-1)
        hits = int((score > threshold).sum())
        detections.append((i, int(keyword[0]), hits))
    return detections


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--chunks", type=int, default=40)
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = KeywordSpotter()
    model.eval()
    detections = spot(model, feature_stream(args.chunks, args.batch, 8, 40))
    for i, keyword, hits in detections[::10]:
        print(f"chunk {i}: keyword {keyword} hits {hits}")


if __name__ == "__main__":
    main()
