# Source: https://github.com/wenet-e2e/wekws/pull/73
#   code: kws/utils/executor.py (Executor.train), kws/model/loss.py (max_pooling_loss,
#   criterion) and kws/utils/mask.py (padding_mask) at 141d407^ (the parent of the fix)
# Adapted: the modules in one file (criterion keeps only the max_pooling branch); the KWS
#   model -> a small GRU with a sigmoid keyword head; random 40-dim features of 60-100
#   frames instead of the Hey-Snips data; no tensorboard writer; 2 epochs of 12 batches.
import logging

import torch
from torch.nn.utils import clip_grad_norm_


def padding_mask(lengths: torch.Tensor) -> torch.Tensor:
    batch_size = lengths.size(0)
    max_len = int(lengths.max().item())
    seq = torch.arange(max_len, dtype=torch.int64, device=lengths.device)
    seq = seq.expand(batch_size, max_len)
    return seq >= lengths.unsqueeze(1)


def max_pooling_loss(logits: torch.Tensor,
                     target: torch.Tensor,
                     lengths: torch.Tensor,
                     min_duration: int = 0):
    ''' Max-pooling loss '''
    mask = padding_mask(lengths)
    num_utts = logits.size(0)
    num_keywords = logits.size(2)

    target = target.cpu()
    loss = 0.0
    for i in range(num_utts):
        for j in range(num_keywords):
            # Add entropy loss CE = -(t * log(p) + (1 - t) * log(1 - p))
            if target[i] == j:
                # For the keyword, do max-polling
                prob = logits[i, :, j]
                m = mask[i].clone().detach()
                m[:min_duration] = True
                prob = prob.masked_fill(m, 0.0)
                prob = torch.clamp(prob, 1e-8, 1.0)
                max_prob = prob.max()
                loss += -torch.log(max_prob)
            else:
                # For other keywords or filler, do min-polling
                prob = 1 - logits[i, :, j]
                prob = prob.masked_fill(mask[i], 1.0)
                prob = torch.clamp(prob, 1e-8, 1.0)
                min_prob = prob.min()
                loss += -torch.log(min_prob)
    loss = loss / num_utts

    # Compute accuracy of current batch
    mask = mask.unsqueeze(-1)
    logits = logits.masked_fill(mask, 0.0)
    max_logits, index = logits.max(1)
    num_correct = 0
    for i in range(num_utts):
        max_p, idx = max_logits[i].max(0)
        # Predict correct as the i'th keyword
        if max_p > 0.5 and idx == target[i]:
            num_correct += 1
        # Predict correct as the filler, filler id < 0
        if max_p < 0.5 and target[i] < 0:
            num_correct += 1
    acc = num_correct / num_utts
    # acc = 0.0
    return loss, acc


def criterion(type: str,
              logits: torch.Tensor,
              target: torch.Tensor,
              lengths: torch.Tensor,
              min_duration: int = 0):
    loss, acc = max_pooling_loss(logits, target, lengths, min_duration)
    return loss, acc


class Executor:
    def __init__(self):
        self.step = 0

    def train(self, model, optimizer, data_loader, device, writer, args):
        ''' Train one epoch
        '''
        model.train()
        clip = args.get('grad_clip', 50.0)
        log_interval = args.get('log_interval', 10)
        epoch = args.get('epoch', 0)
        min_duration = args.get('min_duration', 0)

        num_total_batch = 0
        total_loss = 0.0
        for batch_idx, batch in enumerate(data_loader):
            key, feats, target, feats_lengths = batch
            feats = feats.to(device)
            target = target.to(device)
            feats_lengths = feats_lengths.to(device)
            num_utts = feats_lengths.size(0)
            if num_utts == 0:
                continue
            logits = model(feats)
            loss_type = args.get('criterion', 'max_pooling')
            loss, acc = criterion(loss_type, logits, target, feats_lengths)
            loss.backward()
            grad_norm = clip_grad_norm_(model.parameters(), clip)
            if torch.isfinite(grad_norm):
                optimizer.step()
            if batch_idx % log_interval == 0:
                logging.debug(
                    'TRAIN Batch {}/{} loss {:.8f} acc {:.8f}'.format(
                        epoch, batch_idx, loss.item(), acc))


class KWSModel(torch.nn.Module):
    def __init__(self, idim=40, hdim=64, num_keywords=2):
        super().__init__()
        self.gru = torch.nn.GRU(idim, hdim, batch_first=True)
        self.classifier = torch.nn.Linear(hdim, num_keywords)

    def forward(self, x):
        x, _ = self.gru(x)
        return torch.sigmoid(self.classifier(x))


if __name__ == '__main__':
    logging.basicConfig(level=logging.DEBUG, format='%(message)s')
    torch.manual_seed(0)
    data_loader = []
    for b in range(12):
        lengths = torch.randint(60, 101, (16,))
        feats = torch.randn(16, int(lengths.max()), 40)
        target = torch.randint(-1, 2, (16,))
        data_loader.append(([f"utt{b}_{i}" for i in range(16)], feats, target, lengths))
    model = KWSModel()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.001)
    executor = Executor()
    for epoch in range(2):
        executor.train(model, optimizer, data_loader, torch.device('cpu'), None,
                       {'epoch': epoch, 'log_interval': 4, 'grad_clip': 5})
