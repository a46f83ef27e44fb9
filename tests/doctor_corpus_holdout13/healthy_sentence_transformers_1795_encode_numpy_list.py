# Source: https://github.com/huggingface/sentence-transformers/issues/1795
#   code: the memleak.py (a list of model.encode results per iteration) and
#   SentenceTransformer.encode (eval mode, batches sorted by length, forward under
#   torch.no_grad(), embeddings detached and turned into numpy, a single string in -> one
#   array out)
# Adapted: sentence-transformers is not installed and the multilingual MiniLM cannot be
#   downloaded: a stand-in SentenceTransformer with the same encode interface runs a small
#   mean-pooled transformer encoder over character-hash tokens (max_seq_length 128); strings
#   of 1234 random characters instead of 12345; 20 iterations of 60 encodes instead of an
#   endless loop of 200; RSS printed as in the issue.
import random
import string

import numpy as np
import psutil
import torch
import torch.nn as nn


class SentenceTransformer(nn.Module):
    def __init__(self, model_name_or_path, max_seq_length=128, dim=96):
        super().__init__()
        self.max_seq_length = max_seq_length
        self.embeddings = nn.Embedding(4096, dim)
        layer = nn.TransformerEncoderLayer(dim, 4, 192, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

    def tokenize(self, texts):
        ids = [[hash(w) % 4096 for w in t.split()][:self.max_seq_length] or [0] for t in texts]
        length = max(len(i) for i in ids)
        input_ids = torch.tensor([i + [0] * (length - len(i)) for i in ids])
        attention_mask = torch.tensor([[1] * len(i) + [0] * (length - len(i)) for i in ids])
        return {"input_ids": input_ids, "attention_mask": attention_mask}

    def forward(self, features):
        hidden = self.encoder(self.embeddings(features["input_ids"]),
                              src_key_padding_mask=features["attention_mask"] == 0)
        mask = features["attention_mask"].unsqueeze(-1).float()
        features["sentence_embedding"] = (hidden * mask).sum(1) / mask.sum(1)
        return features

    def encode(self, sentences, batch_size=32, convert_to_numpy=True):
        self.eval()
        input_was_string = False
        if isinstance(sentences, str):
            sentences = [sentences]
            input_was_string = True
        all_embeddings = []
        length_sorted_idx = np.argsort([-len(s) for s in sentences])
        sentences_sorted = [sentences[idx] for idx in length_sorted_idx]
        for start_index in range(0, len(sentences), batch_size):
            sentences_batch = sentences_sorted[start_index:start_index + batch_size]
            features = self.tokenize(sentences_batch)
            with torch.no_grad():
                out_features = self.forward(features)
                embeddings = out_features["sentence_embedding"].detach()
                if convert_to_numpy:
                    embeddings = embeddings.cpu()
                all_embeddings.extend(embeddings)
        all_embeddings = [all_embeddings[idx] for idx in np.argsort(length_sorted_idx)]
        if convert_to_numpy:
            all_embeddings = np.asarray([emb.numpy() for emb in all_embeddings])
        if input_was_string:
            all_embeddings = all_embeddings[0]
        return all_embeddings


model = SentenceTransformer('paraphrase-multilingual-MiniLM-L12-v2')


def random_string(length: int) -> str:
    return ''.join(random.choices(string.ascii_uppercase + string.digits + ' ', k=length))


random.seed(0)
torch.manual_seed(0)
print('iteration,memory_usage_in_MiB', flush=True)
for iteration in range(20):
    a = [model.encode(random_string(1234)) for _ in range(60)]
    memory_usage_in_MiB = psutil.Process().memory_info().rss / (1024 * 1024)
    print(f'{iteration:02d}, {memory_usage_in_MiB:.2f}', flush=True)
