# Source: https://github.com/flairNLP/flair/pull/1089
# Adapted: FlairEmbeddings._add_embeddings_internal of flair/embeddings.py as in the branch
#   of pull request #1074 before its optimisation was reverted (8bc166c^), the version
#   #1089 explains, with Token.set_embedding of flair/data.py; Sentence and Token are
#   reduced to text, tokens and stored embeddings, and the character language model is a
#   small char embedding + LSTM with the same get_representation(strings, chars_per_chunk)
#   returning (characters, batch, hidden) states; the corpus is 480 random sentences embedded
#   in batches of 16 and kept, with their embeddings, as a trainer does with
#   embeddings_storage_mode "cpu"; cpu, seeded.
import random
from typing import List

import torch
from torch import nn

random.seed(0)
torch.manual_seed(0)

WORDS = ["the", "market", "rose", "sharply", "after", "news", "of", "a", "merger", "between",
         "two", "large", "banks", "in", "Frankfurt", "and", "Paris", "on", "Monday"]


class Token:
    def __init__(self, text):
        self.text = text
        self._embeddings = {}

    def set_embedding(self, name: str, vector: torch.tensor):
        device = torch.device("cpu")
        if len(self._embeddings.keys()) > 0:
            device = next(iter(self._embeddings.values())).device
        self._embeddings[name] = vector.to(device, non_blocking=True)


class Sentence:
    def __init__(self, text):
        self.tokens = [Token(t) for t in text.split()]

    def to_tokenized_string(self):
        return " ".join(t.text for t in self.tokens)


class LanguageModel(nn.Module):
    def __init__(self, hidden_size=256):
        super().__init__()
        self.encoder = nn.Embedding(256, 32)
        self.rnn = nn.LSTM(32, hidden_size)

    def get_representation(self, strings: List[str], chars_per_chunk: int = 512):
        ids = torch.tensor([[min(ord(c), 255) for c in s] for s in strings]).t()
        output, _ = self.rnn(self.encoder(ids))
        return output


class FlairEmbeddings:
    def __init__(self, model, fine_tune: bool = False, chars_per_chunk: int = 512):
        self.lm = model
        self.name = "news-forward"
        self.fine_tune = fine_tune
        self.chars_per_chunk = chars_per_chunk
        self.is_forward_lm = True

    def embed(self, sentences):
        return self._add_embeddings_internal(sentences)

    def _add_embeddings_internal(self, sentences: List[Sentence]) -> List[Sentence]:

        # gradients are enable if fine-tuning is enabled
        gradient_context = torch.enable_grad() if self.fine_tune else torch.no_grad()

        with gradient_context:

            # if this is not possible, use LM to generate embedding. First, get text sentences
            text_sentences = [sentence.to_tokenized_string() for sentence in sentences]

            longest_character_sequence_in_batch: int = len(max(text_sentences, key=len))

            # pad strings with whitespaces to longest sentence
            sentences_padded: List[str] = []
            append_padded_sentence = sentences_padded.append

            start_marker = "\n"

            end_marker = " "
            extra_offset = len(start_marker)
            for sentence_text in text_sentences:
                pad_by = longest_character_sequence_in_batch - len(sentence_text)
                if self.is_forward_lm:
                    padded = "{}{}{}{}".format(
                        start_marker, sentence_text, end_marker, pad_by * " "
                    )
                    append_padded_sentence(padded)
                else:
                    padded = "{}{}{}{}".format(
                        start_marker, sentence_text[::-1], end_marker, pad_by * " "
                    )
                    append_padded_sentence(padded)

            # get hidden states from language model
            all_hidden_states_in_lm = self.lm.get_representation(
                sentences_padded, self.chars_per_chunk
            )

            # take first or last hidden states from language model as word representation
            for i, sentence in enumerate(sentences):
                sentence_text = sentence.to_tokenized_string()

                offset_forward: int = extra_offset
                offset_backward: int = len(sentence_text) + extra_offset

                for token in sentence.tokens:

                    offset_forward += len(token.text)

                    if self.is_forward_lm:
                        offset = offset_forward
                    else:
                        offset = offset_backward

                    embedding = all_hidden_states_in_lm[offset, i, :]

                    # if self.tokenized_lm or token.whitespace_after:
                    offset_forward += 1
                    offset_backward -= 1

                    offset_backward -= len(token.text)

                    if self.fine_tune:
                        embedding = embedding.clone()
                    else:
                        embedding = embedding.detach()

                    token.set_embedding(self.name, embedding)

            all_hidden_states_in_lm = all_hidden_states_in_lm.detach()
            all_hidden_states_in_lm = None

        return sentences


corpus = [Sentence(" ".join(random.choice(WORDS) for _ in range(random.randint(8, 30))))
          for _ in range(480)]
embeddings = FlairEmbeddings(LanguageModel())
for start in range(0, len(corpus), 16):
    batch = corpus[start:start + 16]
    embeddings.embed(batch)

n_tokens = sum(len(s.tokens) for s in corpus)
print("tokens embedded:", n_tokens, "bytes needed:", n_tokens * 256 * 4)
