# Source: https://github.com/huggingface/transformers/issues/16036
# Adapted: the loop kept as posted (conc = torch.empty(...), model.eval(), the batched
#   conc[i:i+batch_size] = model(tokens[i:i+batch_size])[1]); transformers is not installed and
#   the codebert checkpoint cannot be loaded, so RobertaModel is a small stand-in with the same
#   call and outputs (token embeddings, 2 transformer encoder layers, a tanh pooler over the
#   first token; output [1] is the pooled output); the tokenizer's input_ids are random ids;
#   5000 x 768 tokens -> 96 x 64, hidden size 768 -> 64 (conc is 96 x 64), cpu, seeded.
import torch
import torch.nn as nn


class RobertaModel(nn.Module):
    def __init__(self, vocab_size=1000, hidden_size=64, num_layers=2):
        super().__init__()
        self.embeddings = nn.Embedding(vocab_size, hidden_size)
        layer = nn.TransformerEncoderLayer(hidden_size, nhead=4, dim_feedforward=4 * hidden_size,
                                           dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=num_layers, enable_nested_tensor=False)
        self.pooler = nn.Sequential(nn.Linear(hidden_size, hidden_size), nn.Tanh())

    @classmethod
    def from_pretrained(cls, name):
        return cls()

    def forward(self, input_ids):
        sequence_output = self.encoder(self.embeddings(input_ids))
        pooled_output = self.pooler(sequence_output[:, 0])
        return sequence_output, pooled_output


torch.manual_seed(0)
model = RobertaModel.from_pretrained("codebert")
batch_size = 8
tokens = torch.randint(0, 1000, (96, 64))
conc = torch.empty(size=(len(tokens), 64))
model.eval()
for i in range(0, len(tokens), batch_size):
    conc[i:i+batch_size] = model(tokens[i:i+batch_size])[1]
print(conc.shape, conc.requires_grad)
