# Source: https://github.com/pytorch/torchtitan/issues/763
# Adapted: the training loop of train.py at 6b03ffa (the commit the issue links), its
#   non-pipeline, single-process path: forward, backward, gradient clipping, optimizer and
#   scheduler steps, losses_since_last_log and the log step; the Llama model, the tokenizer
#   and data loader, float8, checkpointing, profilers and the metric logger are replaced by a
#   small next-token model (embedding + GRU + output projection) on random token ids, plain
#   AdamW/LambdaLR and print; logging infrequent as in the report (log_freq 1000 for a
#   200-step run), batch 4 x 64 tokens, cpu, seeded.
import time
from dataclasses import dataclass, field
from typing import List

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)


@dataclass
class TrainState:
    step: int = 0
    global_avg_losses: List[float] = field(default_factory=list)
    global_max_losses: List[float] = field(default_factory=list)
    log_steps: List[int] = field(default_factory=list)


class Transformer(nn.Module):
    def __init__(self, vocab_size=512, dim=64):
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab_size, dim)
        self.layers = nn.GRU(dim, dim, batch_first=True)
        self.output = nn.Linear(dim, vocab_size)

    def forward(self, tokens):
        h, _ = self.layers(self.tok_embeddings(tokens))
        return self.output(h)


def loss_fn(pred, labels):
    return F.cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1))


def data_iterator(vocab_size=512, batch_size=4, seq_len=64):
    while True:
        tokens = torch.randint(0, vocab_size, (batch_size, seq_len + 1))
        yield tokens[:, :-1], tokens[:, 1:]


def main(log_freq=1000, steps=200, max_norm=1.0):
    model = Transformer()
    model_parts = [model]
    optimizers = torch.optim.AdamW(model.parameters(), lr=8e-4)
    lr_schedulers = torch.optim.lr_scheduler.LambdaLR(optimizers, lambda step: 1.0)
    train_state = TrainState()
    data_iterator_ = data_iterator()

    losses_since_last_log = []
    ntokens_since_last_log = 0
    data_loading_times = []
    time_last_log = time.perf_counter()

    while train_state.step < steps:
        train_state.step += 1

        # get batch
        data_load_start = time.perf_counter()
        input_ids, labels = next(data_iterator_)
        ntokens_since_last_log += labels.numel()
        data_loading_times.append(time.perf_counter() - data_load_start)

        optimizers.zero_grad()

        # Non-PP forward / backward
        pred = model(input_ids)
        loss = loss_fn(pred, labels)
        # pred.shape=(bs, seq_len, vocab_size)
        # need to free to before bwd to avoid peaking memory
        del pred
        loss.backward()

        # clip gradients
        torch.nn.utils.clip_grad_norm_(
            [p for m in model_parts for p in m.parameters()], max_norm, foreach=True
        )

        # optimizer step
        optimizers.step()
        lr_schedulers.step()

        losses_since_last_log.append(loss)

        # log metrics
        if (
            train_state.step == 1
            or train_state.step % log_freq == 0
        ):
            losses = [loss.item() for loss in losses_since_last_log]
            avg_loss, max_loss = sum(losses) / len(losses), max(losses)
            global_avg_loss, global_max_loss = avg_loss, max_loss

            # update train state
            train_state.log_steps.append(train_state.step)
            train_state.global_avg_losses.append(global_avg_loss)
            train_state.global_max_losses.append(global_max_loss)

            time_delta = time.perf_counter() - time_last_log
            tps = ntokens_since_last_log / time_delta
            print(f"step: {train_state.step:2}  loss: {global_avg_loss:7.4f}  tps: {round(tps):,}")

            losses_since_last_log.clear()
            ntokens_since_last_log = 0
            data_loading_times.clear()
            time_last_log = time.perf_counter()


if __name__ == "__main__":
    main()
