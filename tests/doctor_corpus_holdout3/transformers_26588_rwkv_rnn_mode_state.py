# Source: https://github.com/huggingface/transformers/issues/26588
# Adapted: "RWKV/rwkv-4-430m-pile" replaced by a 2-layer RWKV-4 of width 64 with the same
#   RNN-mode interface as transformers' RwkvForCausalLM (forward(input_ids, attention_mask,
#   state, use_cache, output_hidden_states) returning .logits, .state and .hidden_states, the
#   state a list of 5 tensors of shape (batch, hidden, layers)), AutoTokenizer replaced by a
#   byte-level stub with the same call; device_map="auto" -> cpu. The stored report stops at
#   `inputs = tokenizer(string,`; the loop body was completed as the RNN-mode use the title
#   describes (feed outputs.state back at every call), 60 calls instead of `while True`, the
#   sleep dropped, seeded.
import time
from types import SimpleNamespace

import torch
import torch.nn as nn


class BatchEncoding(dict):
    def to(self, device):
        return BatchEncoding({k: v.to(device) for k, v in self.items()})


class AutoTokenizer:
    @classmethod
    def from_pretrained(cls, model_name):
        return cls()

    def __call__(self, text, return_tensors="pt"):
        ids = torch.tensor([list(text.encode("utf-8"))])
        return BatchEncoding(input_ids=ids, attention_mask=torch.ones_like(ids))


class RwkvBlock(nn.Module):
    def __init__(self, hidden_size, layer_id):
        super().__init__()
        self.layer_id = layer_id
        self.ln1 = nn.LayerNorm(hidden_size)
        self.ln2 = nn.LayerNorm(hidden_size)
        self.time_decay = nn.Parameter(torch.randn(hidden_size) * 0.1)
        self.time_first = nn.Parameter(torch.randn(hidden_size) * 0.1)
        self.time_mix_key = nn.Parameter(torch.rand(hidden_size))
        self.time_mix_value = nn.Parameter(torch.rand(hidden_size))
        self.time_mix_receptance = nn.Parameter(torch.rand(hidden_size))
        self.key = nn.Linear(hidden_size, hidden_size, bias=False)
        self.value = nn.Linear(hidden_size, hidden_size, bias=False)
        self.receptance = nn.Linear(hidden_size, hidden_size, bias=False)
        self.output = nn.Linear(hidden_size, hidden_size, bias=False)
        self.ffn_mix_key = nn.Parameter(torch.rand(hidden_size))
        self.ffn_mix_receptance = nn.Parameter(torch.rand(hidden_size))
        self.ffn_key = nn.Linear(hidden_size, 4 * hidden_size, bias=False)
        self.ffn_receptance = nn.Linear(hidden_size, hidden_size, bias=False)
        self.ffn_value = nn.Linear(4 * hidden_size, hidden_size, bias=False)

    def forward(self, x, state):
        i = self.layer_id
        ffn_x, att_x, num, den, max_e = (s[:, :, i] for s in state)
        outs = []
        for t in range(x.size(1)):
            h = self.ln1(x[:, t])
            k = self.key(h * self.time_mix_key + att_x * (1 - self.time_mix_key))
            v = self.value(h * self.time_mix_value + att_x * (1 - self.time_mix_value))
            r = torch.sigmoid(self.receptance(h * self.time_mix_receptance + att_x * (1 - self.time_mix_receptance)))
            att_x = h
            ww = self.time_first + k
            q = torch.maximum(max_e, ww)
            e1, e2 = torch.exp(max_e - q), torch.exp(ww - q)
            wkv = (e1 * num + e2 * v) / (e1 * den + e2)
            ww = max_e - torch.exp(self.time_decay)
            q = torch.maximum(ww, k)
            e1, e2 = torch.exp(ww - q), torch.exp(k - q)
            num, den, max_e = e1 * num + e2 * v, e1 * den + e2, q
            y = x[:, t] + self.output(r * wkv)
            h = self.ln2(y)
            k = torch.square(torch.relu(self.ffn_key(h * self.ffn_mix_key + ffn_x * (1 - self.ffn_mix_key))))
            r = torch.sigmoid(self.ffn_receptance(h * self.ffn_mix_receptance + ffn_x * (1 - self.ffn_mix_receptance)))
            ffn_x = h
            outs.append(y + r * self.ffn_value(k))
        new = (ffn_x, att_x, num, den, max_e)
        return torch.stack(outs, dim=1), new


class RwkvForCausalLM(nn.Module):
    def __init__(self, vocab_size=256, hidden_size=64, num_hidden_layers=2, output_hidden_states=False):
        super().__init__()
        self.hidden_size, self.num_hidden_layers = hidden_size, num_hidden_layers
        self.output_hidden_states = output_hidden_states
        self.embeddings = nn.Embedding(vocab_size, hidden_size)
        self.blocks = nn.ModuleList([RwkvBlock(hidden_size, i) for i in range(num_hidden_layers)])
        self.ln_out = nn.LayerNorm(hidden_size)
        self.head = nn.Linear(hidden_size, vocab_size, bias=False)

    @classmethod
    def from_pretrained(cls, model_name, output_hidden_states=False, device_map=None):
        return cls(output_hidden_states=output_hidden_states)

    @property
    def device(self):
        return self.head.weight.device

    def forward(self, input_ids, attention_mask=None, state=None, use_cache=True,
                output_hidden_states=None):
        output_hidden_states = self.output_hidden_states if output_hidden_states is None else output_hidden_states
        b = input_ids.size(0)
        if state is None:
            shape = (b, self.hidden_size, self.num_hidden_layers)
            state = [torch.zeros(shape) for _ in range(4)] + [torch.full(shape, -1e38)]
        x = self.embeddings(input_ids)
        all_hidden_states = (x,) if output_hidden_states else None
        new_state = [[None] * self.num_hidden_layers for _ in range(5)]
        for i, block in enumerate(self.blocks):
            x, layer_state = block(x, state)
            for s, value in zip(new_state, layer_state):
                s[i] = value
            if output_hidden_states:
                all_hidden_states = all_hidden_states + (x,)
        state = [torch.stack(s, dim=-1) for s in new_state] if use_cache else None
        logits = self.head(self.ln_out(x))
        return SimpleNamespace(logits=logits, state=state, hidden_states=all_hidden_states)


AutoModelForCausalLM = RwkvForCausalLM

torch.manual_seed(0)
model_name = "RWKV/rwkv-4-430m-pile"

string = "Lorem ipsum dolor sit amet, consectetur adipiscing elit."


tokenizer = AutoTokenizer.from_pretrained(
    model_name,
)
model = AutoModelForCausalLM.from_pretrained(
    model_name,
    output_hidden_states=True,
    device_map="auto",
)

state = None

for step in range(60):
    inputs = tokenizer(string, return_tensors="pt").to(model.device)
    outputs = model(**inputs, state=state)
    state = outputs.state
    if step % 20 == 0:
        print(step, outputs.logits[0, -1].argmax().item())
