# Source: https://github.com/evandez/relations/blob/ad78180b0cb82f9195a563cead07c3476c153806/src/functional.py
# Adapted excerpt, before the fix https://github.com/evandez/relations/commit/0cf6aeb0c870f361fb646842dc63839c086fb386
# (trimmed to the code the fix touches; omitted lines are marked).
import logging
import random
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, Sequence

from src import data, models
from src.utils import tokenizer_utils
from src.utils.typing import Layer, ModelInput, ModelOutput, StrSequence

import baukit
import torch
from dataclasses_json import DataClassJsonMixin
from tqdm.auto import tqdm

logger = logging.getLogger(__name__)

DEFAULT_BATCH_SIZE = 48  # Reduced to 48 to fit in A6000
DEFAULT_N_ICL_LM = 5
DEFAULT_N_TOP_LM = 1

# ... (lines 22-355 omitted)
@dataclass(frozen=True, kw_only=True)
class PredictedToken(DataClassJsonMixin):
    """A predicted token and its probability."""

    token: str
    prob: float

    def __str__(self) -> str:
        return f"{self.token} (p={self.prob:.3f})"


@torch.inference_mode()
def predict_next_token(
    *,
    mt: models.ModelAndTokenizer,
    prompt: str | StrSequence,
    k: int = 5,
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> list[list[PredictedToken]]:
    """Compute the next token."""
    if isinstance(prompt, str):
        prompt = [prompt]
    with models.set_padding_side(mt, padding_side="left"):
        inputs = mt.tokenizer(prompt, return_tensors="pt", padding="longest").to(
            mt.model.device
        )
    with torch.inference_mode():
        batched_logits = []
        for i in range(0, len(inputs.input_ids), batch_size):
            batch_outputs = mt.model(
                input_ids=inputs.input_ids[i : i + batch_size],
                attention_mask=inputs.attention_mask[i : i + batch_size],
            )
            batched_logits.append(batch_outputs.logits)
        logits = torch.cat(batched_logits, dim=0)

    next_token_probs = logits[:, -1].float().softmax(dim=-1)
    next_token_topk = next_token_probs.topk(dim=-1, k=k)

    predictions = []
    for token_ids, token_probs in zip(next_token_topk.indices, next_token_topk.values):
        predictions.append(
            [
                PredictedToken(token=mt.tokenizer.decode(token_id), prob=prob.item())
                for token_id, prob in zip(token_ids, token_probs)
            ]
        )
    return predictions


# ... (lines 406-823 omitted)
