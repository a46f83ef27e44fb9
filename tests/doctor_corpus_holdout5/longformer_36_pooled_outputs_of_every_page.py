# Source: https://github.com/allenai/longformer/issues/36
# Adapted: the posted snippet kept as it was (indentation regularised); the packages it uses
#   and torchmem does not install are replaced by stubs with the same interface: longformer's
#   Longformer.from_pretrained (a 2-layer RoBERTa-like encoder, hidden size 64, returning the
#   sequence output and the pooled output as the real model does), its pad_to_window_size
#   (pads to a multiple of the attention window, as longformer.sliding_chunks does) and
#   transformers' RobertaTokenizer (cls/eos/pad tokens, encode() to word ids); `pages` is 80
#   random documents of 100-200 words instead of the reporter's 2200; the model is built from
#   random weights instead of longformer_base_dir; seeded.
import random
import types

import torch
import torch.nn as nn
import torch.nn.functional as F


# ---- stubs for packages not installed (same interfaces) ----
class Longformer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.embeddings = nn.Embedding(config.vocab_size, config.hidden_size)
        layer = nn.TransformerEncoderLayer(config.hidden_size, 4, 4 * config.hidden_size, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2)
        self.pooler = nn.Linear(config.hidden_size, config.hidden_size)

    @classmethod
    def from_pretrained(cls, path, config):
        return cls(config)

    def forward(self, input_ids, attention_mask=None):
        x = self.embeddings(input_ids)
        x = self.encoder(x, src_key_padding_mask=attention_mask == 0)
        return x, torch.tanh(self.pooler(x[:, 0]))


def pad_to_window_size(input_ids, attention_mask, one_sided_window_size, pad_token_id):
    w = 2 * one_sided_window_size
    seqlen = input_ids.size(1)
    padding_len = (w - seqlen % w) % w
    input_ids = F.pad(input_ids, (0, padding_len), value=pad_token_id)
    attention_mask = F.pad(attention_mask, (0, padding_len), value=0)
    return input_ids, attention_mask


class RobertaTokenizer:
    cls_token, eos_token, pad_token_id = "<s>", "</s>", 1

    @classmethod
    def from_pretrained(cls, name):
        return cls()

    def encode(self, text):
        return [0 if w == "<s>" else 2 if w == "</s>" else 3 + hash(w) % 997
                for w in text.replace("<s>", "<s> ").replace("</s>", " </s>").split()]


config = types.SimpleNamespace(vocab_size=1000, hidden_size=64, attention_window=[32],
                               max_position_embeddings=4098)
longformer_base_dir = "longformer-base-4096"
random.seed(0)
torch.manual_seed(0)
words = "the of and to in a is that for it as was with be by on not he this are or".split()
pages = [" ".join(random.choices(words, k=random.randint(100, 200))) for _ in range(80)]
# ---- end of stubs ----

model = Longformer.from_pretrained(longformer_base_dir, config=config)

tokenizer = RobertaTokenizer.from_pretrained('roberta-base')
tokenizer.max_len = model.config.max_position_embeddings
output_vec =[]
for pg in pages:
    pg = f'{tokenizer.cls_token}{pg}{tokenizer.eos_token}'
    input_ids = torch.tensor(tokenizer.encode(pg)).unsqueeze(0)  # batch of size 1        
    attention_mask = torch.ones(input_ids.shape, dtype=torch.long, device=input_ids.device)

    input_ids, attention_mask = pad_to_window_size(
            input_ids, attention_mask, config.attention_window[0], tokenizer.pad_token_id)

    output = model(input_ids, attention_mask=attention_mask)
    output_vec.append(output[1])
print(len(output_vec), output_vec[-1].shape)
