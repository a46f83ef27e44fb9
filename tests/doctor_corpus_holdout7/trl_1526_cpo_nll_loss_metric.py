# Source: https://github.com/huggingface/trl/issues/1526
#   code: CPOTrainer of trl/trainer/cpo_trainer.py in trl 0.8.3 (before
#   https://github.com/huggingface/trl/pull/1531): get_batch_loss_metrics, cpo_loss,
#   compute_loss, store_metrics and log
# Adapted: those methods kept with their names and logic (sigmoid loss only; the encoder-decoder
#   and padding branches of concatenated_forward and get_batch_logps reduced to the
#   decoder-only case); the transformers Trainer around them replaced by a minimal loop that
#   calls compute_loss, backward and the optimizer step, and log() every logging_steps=40
#   steps (transformers' default is 500); the language model by a small embedding + GRU +
#   linear model returning an object with .logits; the preference dataset by random token
#   batches of 4 chosen and 4 rejected sequences of 32 tokens; 120 steps; cpu, seeded.
import types
from collections import defaultdict

import torch
import torch.nn as nn
import torch.nn.functional as F


class TinyLM(nn.Module):
    def __init__(self, vocab=500, dim=128):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.head = nn.Linear(dim, vocab)

    def forward(self, input_ids, attention_mask=None):
        h, _ = self.rnn(self.embed(input_ids))
        return types.SimpleNamespace(logits=self.head(h))


class CPOTrainer:
    def __init__(self, model, beta=0.1, label_smoothing=0.0, loss_type="sigmoid", label_pad_token_id=-100):
        self.model = model
        self.beta = beta
        self.label_smoothing = label_smoothing
        self.loss_type = loss_type
        self.label_pad_token_id = label_pad_token_id
        self._stored_metrics = defaultdict(lambda: defaultdict(list))

    def cpo_loss(self, policy_chosen_logps, policy_rejected_logps):
        logits = policy_chosen_logps - policy_rejected_logps

        if self.loss_type == "sigmoid":
            losses = (
                -F.logsigmoid(self.beta * logits) * (1 - self.label_smoothing)
                - F.logsigmoid(-self.beta * logits) * self.label_smoothing
            )
        else:
            raise ValueError(f"Unknown loss type: {self.loss_type}.")

        chosen_rewards = self.beta * (policy_chosen_logps).detach()
        rejected_rewards = self.beta * (policy_rejected_logps).detach()

        return losses, chosen_rewards, rejected_rewards

    def get_batch_logps(self, logits, labels, average_log_prob=False):
        labels = labels[:, 1:].clone()
        logits = logits[:, :-1, :]
        loss_mask = labels != self.label_pad_token_id
        labels[labels == self.label_pad_token_id] = 0
        per_token_logps = torch.gather(logits.log_softmax(-1), dim=2, index=labels.unsqueeze(2)).squeeze(2)
        if average_log_prob:
            return (per_token_logps * loss_mask).sum(-1) / loss_mask.sum(-1)
        else:
            return (per_token_logps * loss_mask).sum(-1)

    def concatenated_forward(self, model, batch):
        concatenated_input_ids = torch.cat([batch["chosen_input_ids"], batch["rejected_input_ids"]], dim=0)
        concatenated_labels = torch.cat([batch["chosen_labels"], batch["rejected_labels"]], dim=0)
        len_chosen = batch["chosen_labels"].shape[0]

        all_logits = model(concatenated_input_ids).logits

        def cross_entropy_loss(logits, labels):
            logits = logits[..., :-1, :].contiguous()
            labels = labels[..., 1:].contiguous()
            loss_fct = nn.CrossEntropyLoss()
            logits = logits.view(-1, logits.shape[-1])
            labels = labels.view(-1)
            loss = loss_fct(logits, labels)
            return loss

        labels = concatenated_labels.clone()
        nll_loss = cross_entropy_loss(all_logits[:len_chosen], labels[:len_chosen])

        all_logps = self.get_batch_logps(all_logits, concatenated_labels, average_log_prob=self.loss_type == "ipo")

        chosen_logps = all_logps[:len_chosen]
        rejected_logps = all_logps[len_chosen:]

        chosen_logits = all_logits[:len_chosen]
        rejected_logits = all_logits[len_chosen:]

        return (chosen_logps, rejected_logps, chosen_logits, rejected_logits, nll_loss)

    def get_batch_loss_metrics(self, model, batch, train_eval="train"):
        metrics = {}

        (
            policy_chosen_logps,
            policy_rejected_logps,
            policy_chosen_logits,
            policy_rejected_logits,
            policy_nll_loss,
        ) = self.concatenated_forward(model, batch)

        losses, chosen_rewards, rejected_rewards = self.cpo_loss(
            policy_chosen_logps,
            policy_rejected_logps,
        )

        loss = losses.mean() + policy_nll_loss
        reward_accuracies = (chosen_rewards > rejected_rewards).float()

        prefix = "eval_" if train_eval == "eval" else ""
        metrics[f"{prefix}rewards/chosen"] = chosen_rewards.mean().cpu()
        metrics[f"{prefix}rewards/rejected"] = rejected_rewards.mean().cpu()
        metrics[f"{prefix}rewards/accuracies"] = reward_accuracies.mean().cpu()
        metrics[f"{prefix}rewards/margins"] = (chosen_rewards - rejected_rewards).mean().cpu()
        metrics[f"{prefix}logps/rejected"] = policy_rejected_logps.detach().mean().cpu()
        metrics[f"{prefix}logps/chosen"] = policy_chosen_logps.detach().mean().cpu()
        metrics[f"{prefix}logits/rejected"] = policy_rejected_logits.detach().mean().cpu()
        metrics[f"{prefix}logits/chosen"] = policy_chosen_logits.detach().mean().cpu()
        metrics[f"{prefix}nll_loss"] = policy_nll_loss.cpu().mean()

        return loss, metrics

    def compute_loss(self, model, inputs, return_outputs=False):
        loss, metrics = self.get_batch_loss_metrics(model, inputs, train_eval="train")

        self.store_metrics(metrics, train_eval="train")

        if return_outputs:
            return (loss, metrics)
        return loss

    def store_metrics(self, metrics, train_eval="train"):
        for key, value in metrics.items():
            self._stored_metrics[train_eval][key].append(value)

    def log(self, logs):
        train_eval = "train" if "loss" in logs else "eval"
        for key, metrics in self._stored_metrics[train_eval].items():
            logs[key] = torch.tensor(metrics).mean().item()
        del self._stored_metrics[train_eval]
        print(logs)


def make_batch():
    chosen = torch.randint(0, 500, (4, 32))
    rejected = torch.randint(0, 500, (4, 32))
    return {"chosen_input_ids": chosen, "chosen_labels": chosen.clone(),
            "rejected_input_ids": rejected, "rejected_labels": rejected.clone()}


torch.manual_seed(0)
model = TinyLM()
trainer = CPOTrainer(model)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
logging_steps = 40
tr_loss = 0.0
for step in range(1, 121):
    inputs = make_batch()
    loss = trainer.compute_loss(model, inputs)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    tr_loss += loss.item()
    if step % logging_steps == 0:
        trainer.log({"loss": tr_loss / logging_steps, "step": step})
        tr_loss = 0.0
