# Source: https://github.com/pai4451/ML2021/issues/2
#   code: the training loop of the HW7 (extractive question answering) sample code that the
#   issue quotes (forward, start/end accuracy, backward, logging every logging_step steps)
# Adapted: the pretrained Chinese BERT replaced by a 2-layer transformer encoder of width 64
#   with start/end heads returning an object with .loss, .start_logits and .end_logits; the
#   tokenized DRCD data replaced by random token ids with random answer spans; accelerate's
#   fp16 path kept behind fp16_training = False; 1 epoch of 40 steps with logging_step 100 as
#   in the sample, tqdm dropped, cuda -> cpu, seeded.
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
device = "cpu"
fp16_training = False


class QADataset(Dataset):
    def __init__(self, n, seq_len=96, vocab=800):
        self.input_ids = torch.randint(1, vocab, (n, seq_len))
        self.starts = torch.randint(0, seq_len - 8, (n,))
        self.ends = self.starts + torch.randint(0, 8, (n,))

    def __len__(self):
        return len(self.input_ids)

    def __getitem__(self, idx):
        input_ids = self.input_ids[idx]
        return (input_ids, torch.zeros_like(input_ids), torch.ones_like(input_ids),
                self.starts[idx], self.ends[idx])


class BertForQuestionAnswering(nn.Module):
    def __init__(self, vocab=800, d_model=64, n_layers=2, max_len=96):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, d_model)
        self.token_type_embeddings = nn.Embedding(2, d_model)
        self.position_embeddings = nn.Embedding(max_len, d_model)
        layer = nn.TransformerEncoderLayer(d_model, 4, 4 * d_model, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, n_layers)
        self.qa_outputs = nn.Linear(d_model, 2)

    def forward(self, input_ids, token_type_ids, attention_mask, start_positions=None,
                end_positions=None):
        positions = torch.arange(input_ids.size(1))
        h = (self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
             + self.position_embeddings(positions))
        h = self.encoder(h, src_key_padding_mask=attention_mask == 0)
        start_logits, end_logits = self.qa_outputs(h).unbind(-1)
        loss = None
        if start_positions is not None:
            loss = (F.cross_entropy(start_logits, start_positions)
                    + F.cross_entropy(end_logits, end_positions)) / 2
        return SimpleNamespace(loss=loss, start_logits=start_logits, end_logits=end_logits)


model = BertForQuestionAnswering().to(device)
train_set = QADataset(320)
train_batch_size = 8
train_loader = DataLoader(train_set, batch_size=train_batch_size, shuffle=True, pin_memory=False)

num_epoch = 1
validation = False
logging_step = 100
learning_rate = 1e-4
optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)

model.train()

print("Start Training ...")

for epoch in range(num_epoch):
    step = 1
    train_loss = train_acc = 0

    for data in train_loader:
        # Load all data into GPU
        data = [i.to(device) for i in data]

        # Model inputs: input_ids, token_type_ids, attention_mask, start_positions, end_positions (Note: only "input_ids" is mandatory)
        # Model outputs: start_logits, end_logits, loss (return when start_positions/end_positions are provided)
        output = model(input_ids=data[0], token_type_ids=data[1], attention_mask=data[2], start_positions=data[3], end_positions=data[4])

        # Choose the most probable start position / end position
        start_index = torch.argmax(output.start_logits, dim=1)
        end_index = torch.argmax(output.end_logits, dim=1)

        # Prediction is correct only if both start_index and end_index are correct
        train_acc += ((start_index == data[3]) & (end_index == data[4])).float().mean()
        train_loss += output.loss

        if fp16_training:
            accelerator.backward(output.loss)
        else:
            output.loss.backward()

        optimizer.step()
        optimizer.zero_grad()
        step += 1

        # Print training loss and accuracy over past logging step
        if step % logging_step == 0:
            print(f"Epoch {epoch + 1} | Step {step} | loss = {train_loss.item() / logging_step:.3f}, acc = {train_acc / logging_step:.3f}")
            train_loss = train_acc = 0

    print(f"Epoch {epoch + 1} | Step {step} | loss = {train_loss.item() / (step - 1):.3f}, acc = {train_acc / (step - 1):.3f}")
