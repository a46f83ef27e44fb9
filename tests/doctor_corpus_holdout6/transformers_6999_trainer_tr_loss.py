# Source: https://github.com/huggingface/transformers/pull/6999
# Adapted: Trainer.train and Trainer.training_step of transformers 3.1 (the code the pull
#   request fixes), cut to the single-process, non-fp16, non-TPU path: no checkpoints,
#   evaluation, tensorboard or hyper-parameter search; TrainingArguments and the model are
#   stubbed with the same interface (a model whose forward(**inputs) returns (loss, logits)
#   like a sequence classifier: embedding bag + linear instead of BERT); the Colab's data set
#   -> 300 random batches of 8 sequences of 32 token ids, 1 epoch, cpu, seeded.
import dataclasses
from typing import Dict

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset
from tqdm.auto import tqdm, trange

torch.manual_seed(0)


@dataclasses.dataclass
class TrainingArguments:
    output_dir: str = "out"
    per_device_train_batch_size: int = 8
    gradient_accumulation_steps: int = 1
    learning_rate: float = 5e-5
    max_grad_norm: float = 1.0
    num_train_epochs: float = 1.0
    max_steps: int = -1
    logging_steps: int = 50
    logging_first_step: bool = False
    past_index: int = -1
    disable_tqdm: bool = True
    n_gpu: int = 0
    device: torch.device = torch.device("cpu")


class SequenceClassifier(nn.Module):
    def __init__(self, vocab_size=1000, hidden=64, num_labels=2):
        super().__init__()
        self.embeddings = nn.EmbeddingBag(vocab_size, hidden)
        self.pre_classifier = nn.Linear(hidden, hidden)
        self.classifier = nn.Linear(hidden, num_labels)

    def forward(self, input_ids=None, labels=None):
        pooled = torch.tanh(self.pre_classifier(self.embeddings(input_ids)))
        logits = self.classifier(pooled)
        loss = nn.functional.cross_entropy(logits, labels)
        return (loss, logits)


class RandomTextDataset(Dataset):
    def __len__(self):
        return 2400

    def __getitem__(self, i):
        return {"input_ids": torch.randint(0, 1000, (32,)), "labels": torch.randint(0, 2, ())}


class Trainer:
    def __init__(self, model, args, train_dataset):
        self.model = model
        self.args = args
        self.train_dataset = train_dataset
        self.global_step = None
        self.epoch = None

    def get_train_dataloader(self):
        return DataLoader(self.train_dataset, batch_size=self.args.per_device_train_batch_size)

    def create_optimizer_and_scheduler(self, num_training_steps):
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=self.args.learning_rate)
        self.lr_scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda step: max(0.0, 1 - step / num_training_steps))

    def log(self, logs: Dict[str, float]) -> None:
        print({**logs, "step": self.global_step})

    def _prepare_inputs(self, inputs):
        for k, v in inputs.items():
            if isinstance(v, torch.Tensor):
                inputs[k] = v.to(self.args.device)
        return inputs

    def train(self, model_path=None, trial=None):
        train_dataloader = self.get_train_dataloader()
        t_total = int(len(train_dataloader) // self.args.gradient_accumulation_steps * self.args.num_train_epochs)
        num_train_epochs = self.args.num_train_epochs
        self.create_optimizer_and_scheduler(num_training_steps=t_total)
        model = self.model

        self.global_step = 0
        self.epoch = 0
        epochs_trained = 0

        tr_loss = torch.tensor(0.0).to(self.args.device)
        logging_loss_scalar = 0.0
        model.zero_grad()
        disable_tqdm = self.args.disable_tqdm
        train_pbar = trange(epochs_trained, int(np.ceil(num_train_epochs)), desc="Epoch", disable=disable_tqdm)
        for epoch in range(epochs_trained, int(np.ceil(num_train_epochs))):
            epoch_iterator = train_dataloader
            epoch_pbar = tqdm(epoch_iterator, desc="Iteration", disable=disable_tqdm)
            for step, inputs in enumerate(epoch_iterator):

                tr_loss += self.training_step(model, inputs)

                if (step + 1) % self.args.gradient_accumulation_steps == 0 or (
                    # last step in epoch but step is always smaller than gradient_accumulation_steps
                    len(epoch_iterator) <= self.args.gradient_accumulation_steps
                    and (step + 1) == len(epoch_iterator)
                ):
                    torch.nn.utils.clip_grad_norm_(model.parameters(), self.args.max_grad_norm)
                    self.optimizer.step()

                    self.lr_scheduler.step()
                    model.zero_grad()
                    self.global_step += 1
                    self.epoch = epoch + (step + 1) / len(epoch_iterator)

                    if (self.args.logging_steps > 0 and self.global_step % self.args.logging_steps == 0) or (
                        self.global_step == 1 and self.args.logging_first_step
                    ):
                        logs: Dict[str, float] = {}
                        tr_loss_scalar = tr_loss.item()
                        logs["loss"] = (tr_loss_scalar - logging_loss_scalar) / self.args.logging_steps
                        logs["learning_rate"] = self.lr_scheduler.get_last_lr()[0]
                        logging_loss_scalar = tr_loss_scalar

                        self.log(logs)

                epoch_pbar.update(1)
                if self.args.max_steps > 0 and self.global_step >= self.args.max_steps:
                    break
            epoch_pbar.close()
            train_pbar.update(1)
        train_pbar.close()
        return self.global_step, tr_loss.item() / self.global_step

    def training_step(self, model: nn.Module, inputs) -> torch.Tensor:
        model.train()
        inputs = self._prepare_inputs(inputs)

        outputs = model(**inputs)
        # We don't use .loss here since the model may return tuples instead of ModelOutput.
        loss = outputs[0]

        if self.args.past_index >= 0:
            self._past = outputs[self.args.past_index]

        if self.args.n_gpu > 1:
            loss = loss.mean()  # mean() to average on multi-gpu parallel training

        if self.args.gradient_accumulation_steps > 1:
            loss = loss / self.args.gradient_accumulation_steps

        loss.backward()

        return loss


if __name__ == "__main__":
    trainer = Trainer(model=SequenceClassifier(), args=TrainingArguments(), train_dataset=RandomTextDataset())
    print(trainer.train())
