# Source: https://github.com/pyg-team/pytorch_geometric/pull/10494
#   code: torch_geometric/llm/utils/vectorrag.py (DocumentRetriever) and backend_utils.py (batch_knn) at the parent of 62d0db38
# Adapted: the SentenceTransformer is replaced by a small hashed bag-of-words encoder module with the same
# encoder(texts, **kwargs) call, torchmetrics' pairwise_cosine_similarity by a two-line equivalent;
# the corpus (3000 synthetic documents) is embedded once under torch.no_grad() and passed in as
# embedded_docs; 200 retrieval queries are answered on CPU (no training); save/load are left out.
import random
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor


def pairwise_cosine_similarity(x: Tensor, y: Tensor) -> Tensor:
    return F.normalize(x, dim=-1) @ F.normalize(y, dim=-1).t()


def batch_knn(query_enc: Tensor, embeds: Tensor, k: int) -> Iterator[Tuple[Tensor, Tensor]]:
    prizes = pairwise_cosine_similarity(query_enc, embeds.to(query_enc.device))
    topk = min(k, len(embeds))
    for i, q in enumerate(prizes):
        _, indices = torch.topk(q, topk, largest=True)
        yield indices, query_enc[i].unsqueeze(0)


class TextEncoder(torch.nn.Module):
    def __init__(self, num_buckets=50000, dim=384):
        super().__init__()
        self.num_buckets = num_buckets
        self.embedding = torch.nn.EmbeddingBag(num_buckets, dim, mode="mean")
        self.proj = torch.nn.Sequential(torch.nn.Linear(dim, dim), torch.nn.GELU(), torch.nn.Linear(dim, dim))

    def forward(self, texts: Union[str, List[str]], batch_size: int = 256, verbose: bool = False) -> Tensor:
        if isinstance(texts, str):
            texts = [texts]
        ids, offsets = [], []
        for text in texts:
            offsets.append(len(ids))
            ids.extend(hash(w) % self.num_buckets for w in text.split())
        x = self.embedding(torch.tensor(ids), torch.tensor(offsets))
        return self.proj(x)


class DocumentRetriever:
    def __init__(self, raw_docs: List[str], embedded_docs: Optional[Tensor] = None, k_for_docs: int = 2,
                 model: Optional[Union[torch.nn.Module, Callable]] = None,
                 model_kwargs: Optional[Dict[str, Any]] = None):
        self.raw_docs = raw_docs
        self.embedded_docs = embedded_docs
        self.k_for_docs = k_for_docs
        self.model = model

        if self.model is not None:
            self.encoder = self.model
            self.model_kwargs = model_kwargs

        if self.embedded_docs is None:
            assert self.model is not None, "Model must be provided if embedded_docs is not provided"
            self.model_kwargs = model_kwargs or {}
            self.embedded_docs = self.encoder(self.raw_docs, **self.model_kwargs)
            self.model_kwargs.pop("verbose", None)

    def query(self, query: Union[str, Tensor]) -> List[str]:
        if isinstance(query, str):
            query_enc = self.encoder(query, **self.model_kwargs)
        else:
            query_enc = query

        selected_doc_idxs, _ = next(batch_knn(query_enc, self.embedded_docs, self.k_for_docs))
        return [self.raw_docs[i] for i in selected_doc_idxs]


random.seed(0)
vocab = [f"w{i}" for i in range(8000)]
raw_docs = [" ".join(random.choices(vocab, k=60)) for _ in range(3000)]
encoder = TextEncoder()
with torch.no_grad():
    embedded_docs = encoder(raw_docs)
retriever = DocumentRetriever(raw_docs, embedded_docs=embedded_docs, k_for_docs=4, model=encoder, model_kwargs={})

contexts = []
for step in range(200):
    question = " ".join(random.choices(vocab, k=12))
    docs = retriever.query(question)
    contexts.append("\n".join(docs))
    if step % 50 == 0:
        print(step, len(contexts), len(docs[0]))
