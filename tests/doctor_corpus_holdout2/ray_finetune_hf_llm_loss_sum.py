# Source: https://github.com/ray-project/ray/pull/40940
#   code: the training loop of doc/source/templates/04_finetuning_llms_with_deepspeed/finetune_hf_llm.py
#   as shown in the pull request's diff (timed forward, backward and optimizer step)
# Adapted: the Hugging Face causal LM replaced by a 2-layer transformer LM of width 64 over a
#   500-token vocabulary returning an object with `.loss`, Ray Train, DeepSpeed and accelerate
#   dropped (accelerator.backward(loss) -> loss.backward()), random token batches instead of the
#   tokenized dataset, 1 epoch of 40 steps, cpu, seeded.
import math
import time
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalLM(nn.Module):
    def __init__(self, vocab_size=500, d_model=64, n_layers=2, n_heads=4, max_len=64):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Embedding(max_len, d_model)
        layer = nn.TransformerEncoderLayer(d_model, n_heads, 4 * d_model, dropout=0.0,
                                           batch_first=True)
        self.blocks = nn.TransformerEncoder(layer, n_layers)
        self.lm_head = nn.Linear(d_model, vocab_size)

    def forward(self, input_ids, labels=None):
        seq_len = input_ids.size(1)
        mask = torch.triu(torch.full((seq_len, seq_len), float("-inf")), diagonal=1)
        h = self.embed(input_ids) + self.pos(torch.arange(seq_len))
        logits = self.lm_head(self.blocks(h, mask=mask))
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)),
                                   labels[:, 1:].reshape(-1))
        return SimpleNamespace(loss=loss, logits=logits)


def get_dataloader(num_steps, batch_size=8, seq_len=48):
    for _ in range(num_steps):
        input_ids = torch.randint(0, 500, (batch_size, seq_len))
        yield {"input_ids": input_ids, "labels": input_ids}


def training_function(kwargs: dict):
    config = kwargs["config"]
    num_epochs = int(config["num_epochs"])
    steps_per_epoch = int(config["steps_per_epoch"])
    torch.manual_seed(config["seed"])

    model = CausalLM()
    optimizer = torch.optim.AdamW(model.parameters(), lr=config["lr"])
    lr_scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / 10))

    for epoch in range(num_epochs):
        fwd_time_sum, bwd_time_sum, optim_step_time_sum = 0, 0, 0
        s_epoch = time.time()
        model.train()
        loss_sum = torch.tensor(0.0)
        train_dataloader = get_dataloader(steps_per_epoch)
        for step, batch in enumerate(train_dataloader):
            s_fwd = time.time()
            outputs = model(**batch)
            loss = outputs.loss
            loss_sum += loss
            e_fwd = time.time()
            fwd_time = e_fwd - s_fwd
            fwd_time_sum += fwd_time
            s_bwd = time.time()
            loss.backward()
            e_bwd = time.time()
            bwd_time = e_bwd - s_bwd
            bwd_time_sum += bwd_time

            s_opt_step = time.time()
            optimizer.step()
            lr_scheduler.step()
            optimizer.zero_grad()
            e_opt_step = time.time()
            optim_step_time_sum += e_opt_step - s_opt_step

            if step % 10 == 0:
                print(f"[epoch {epoch} step {step}] loss: {loss.item():.4f} "
                      f"step-time: {e_opt_step - s_fwd:.3f}")

        e_epoch = time.time()
        loss_avg = loss_sum.item() / (step + 1)
        print(f"epoch {epoch}: loss_avg {loss_avg:.4f} perplexity {math.exp(loss_avg):.1f} "
              f"epoch time {e_epoch - s_epoch:.1f}s fwd {fwd_time_sum:.1f}s "
              f"bwd {bwd_time_sum:.1f}s opt {optim_step_time_sum:.1f}s")


if __name__ == "__main__":
    training_function({"config": {"num_epochs": 1, "steps_per_epoch": 40, "lr": 3e-4,
                                  "seed": 42}})
