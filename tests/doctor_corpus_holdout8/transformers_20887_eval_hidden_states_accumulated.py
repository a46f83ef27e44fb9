# Source: https://github.com/huggingface/transformers/issues/20887
# Adapted: the snippet kept (a BertForSequenceClassification loaded with
#   output_hidden_states=True, trained by Trainer with an evaluation set and compute_metrics);
#   transformers is not installed, so the model is a small stand-in with the same outputs
#   (loss, logits, hidden_states of every layer) and Trainer a stand-in whose train() runs the
#   training steps and, at the end of each epoch, evaluate() -> evaluation_loop() as
#   transformers 4.23 does: prediction_step under no_grad returns the logits, which are the
#   model outputs after the loss (logits and hidden_states), and nested_concat gathers them
#   over the whole evaluation set before compute_metrics (eval_accumulation_steps unset);
#   the KR-BERT checkpoint and tokenized data sets -> random token ids, 2 epochs of 10
#   training and 30 evaluation batches of 8 sequences of 64 tokens, hidden size 64, cpu, seeded.
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn


class BertForSequenceClassification(nn.Module):
    def __init__(self, output_hidden_states=False, vocab_size=1000, hidden=64, num_layers=4, num_labels=2):
        super().__init__()
        self.output_hidden_states = output_hidden_states
        self.embeddings = nn.Embedding(vocab_size, hidden)
        self.layers = nn.ModuleList(nn.TransformerEncoderLayer(hidden, 4, 4 * hidden, batch_first=True)
                                    for _ in range(num_layers))
        self.classifier = nn.Linear(hidden, num_labels)

    @classmethod
    def from_pretrained(cls, name, output_hidden_states=False):
        return cls(output_hidden_states=output_hidden_states)

    def forward(self, input_ids, labels=None):
        h = self.embeddings(input_ids)
        hidden_states = (h,)
        for layer in self.layers:
            h = layer(h)
            hidden_states = hidden_states + (h,)
        logits = self.classifier(h[:, 0])
        loss = nn.functional.cross_entropy(logits, labels) if labels is not None else None
        outputs = (logits, hidden_states) if self.output_hidden_states else (logits,)
        return ((loss,) + outputs) if loss is not None else outputs


def torch_pad_and_concatenate(tensor1, tensor2, padding_index=-100):
    if len(tensor1.shape) == 1 or tensor1.shape[1] == tensor2.shape[1]:
        return torch.cat((tensor1, tensor2), dim=0)
    new_shape = (tensor1.shape[0] + tensor2.shape[0], max(tensor1.shape[1], tensor2.shape[1])) + tensor1.shape[2:]
    result = tensor1.new_full(new_shape, padding_index)
    result[: tensor1.shape[0], : tensor1.shape[1]] = tensor1
    result[tensor1.shape[0]:, : tensor2.shape[1]] = tensor2
    return result


def nested_concat(tensors, new_tensors, padding_index=-100):
    if isinstance(tensors, (list, tuple)):
        return type(tensors)(nested_concat(t, n, padding_index=padding_index) for t, n in zip(tensors, new_tensors))
    return torch_pad_and_concatenate(tensors, new_tensors, padding_index=padding_index)


def nested_numpify(tensors):
    if isinstance(tensors, (list, tuple)):
        return type(tensors)(nested_numpify(t) for t in tensors)
    return tensors.cpu().numpy()


class Trainer:
    def __init__(self, model, args, train_dataset, eval_dataset, compute_metrics):
        self.model, self.args = model, args
        self.train_dataset, self.eval_dataset = train_dataset, eval_dataset
        self.compute_metrics = compute_metrics
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate)

    def train(self):
        for epoch in range(self.args.num_train_epochs):
            self.model.train()
            for inputs in self.train_dataset:
                loss = self.model(**inputs)[0]
                loss.backward()
                self.optimizer.step()
                self.optimizer.zero_grad()
            print(epoch, self.evaluate())

    def prediction_step(self, model, inputs):
        with torch.no_grad():
            outputs = model(**inputs)
            loss = outputs[0].mean().detach()
            logits = outputs[1:]
        if len(logits) == 1:
            logits = logits[0]
        return loss, logits, inputs["labels"]

    def evaluate(self):
        return self.evaluation_loop(self.eval_dataset)

    def evaluation_loop(self, dataloader):
        model = self.model
        model.eval()
        losses_host = preds_host = labels_host = None
        for step, inputs in enumerate(dataloader):
            loss, logits, labels = self.prediction_step(model, inputs)
            losses = loss.repeat(labels.shape[0])
            losses_host = losses if losses_host is None else torch.cat((losses_host, losses), dim=0)
            preds_host = logits if preds_host is None else nested_concat(preds_host, logits, padding_index=-100)
            labels_host = labels if labels_host is None else nested_concat(labels_host, labels, padding_index=-100)
        all_preds = nested_numpify(preds_host)
        all_labels = nested_numpify(labels_host)
        metrics = self.compute_metrics(SimpleNamespace(predictions=all_preds, label_ids=all_labels))
        metrics["eval_loss"] = losses_host.mean().item()
        return metrics


def compute_metrics(eval_pred):
    logits = eval_pred.predictions[0] if isinstance(eval_pred.predictions, tuple) else eval_pred.predictions
    return {"accuracy": float((np.argmax(logits, axis=-1) == eval_pred.label_ids).mean())}


def tokenized(n_batches):
    return [{"input_ids": torch.randint(0, 1000, (8, 64)), "labels": torch.randint(0, 2, (8,))}
            for _ in range(n_batches)]


torch.manual_seed(0)
model = BertForSequenceClassification.from_pretrained('snunlp/KR-BERT-char16424', output_hidden_states=True)
training_args = SimpleNamespace(num_train_epochs=2, learning_rate=5e-5)
tokenized_train, tokenized_valid = tokenized(10), tokenized(30)

trainer = Trainer(
    model=model,
    args=training_args,
    train_dataset=tokenized_train,
    eval_dataset=tokenized_valid,
    compute_metrics=compute_metrics,
)
trainer.train()
