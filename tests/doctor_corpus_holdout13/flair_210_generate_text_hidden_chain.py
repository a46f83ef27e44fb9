# Source: https://github.com/flairNLP/flair/issues/210
#   code: flair/models/language_model.py (LanguageModel.forward, init_hidden, generate_text),
#   generate_text without the torch.no_grad() block the issue asks for
# Adapted: flair is not installed: the character dictionary is a small stand-in with the same
#   get_idx_for_item / decode interface; a randomly initialised character LSTM language model
#   (embedding 32, hidden 128, one layer) instead of a pre-trained one; the prefix's
#   characters are fed as in the current code (one forward over all but the last); two texts
#   of 400 characters instead of 1000.
import string
from typing import List

import torch
from torch import logsumexp, nn


class Dictionary:
    def __init__(self, chars):
        self.idx2item = list(chars)
        self.item2idx = {c: i for i, c in enumerate(self.idx2item)}

    def get_idx_for_item(self, item):
        return self.item2idx.get(item, 0)

    def encode_as_sequence(self, texts):
        return torch.tensor([self.get_idx_for_item(c) for text in texts for c in text], dtype=torch.long)

    def decode(self, ids):
        return "".join(self.idx2item[i] for i in ids)

    def __len__(self):
        return len(self.idx2item)


class LanguageModel(nn.Module):
    def __init__(self, dictionary, is_forward_lm, hidden_size, nlayers, embedding_size=100, dropout=0.1,
                 document_delimiter="\n"):
        super().__init__()
        self.tokenizer = dictionary
        self.is_forward_lm = is_forward_lm
        self.hidden_size = hidden_size
        self.nlayers = nlayers
        self.document_delimiter = document_delimiter
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(len(dictionary), embedding_size)
        self.rnn = nn.LSTM(embedding_size, hidden_size, nlayers)
        self.decoder = nn.Linear(hidden_size, len(dictionary))

    def forward(self, input, hidden):
        encoded = self.encoder(input)
        emb = self.drop(encoded)
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output)
        return decoded, output, hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters()).detach()
        return tuple(weight.new(self.nlayers, bsz, self.hidden_size).zero_().clone().detach() for _ in range(2))

    def generate_text(self, prefix="", number_of_characters=1000, temperature=1.0):
        if prefix == "":
            prefix = self.document_delimiter

        decoded_ids: List[int] = []
        hidden = self.init_hidden(1)
        input = self.tokenizer.encode_as_sequence([prefix]).unsqueeze(0).transpose(0, 1)
        if input.size(0) > 1:
            all_until_last = input[:-1]
            prediction, _, hidden = self.forward(all_until_last, hidden)
        input = input[-1].unsqueeze(0)
        log_prob = torch.zeros(1)

        for _i in range(number_of_characters):
            prediction, _, hidden = self.forward(input, hidden)
            prediction = prediction.squeeze().detach()
            decoder_output = prediction
            prediction = prediction.div(temperature)
            max = torch.max(prediction)
            prediction -= max
            word_weights = prediction.exp().cpu()
            try:
                word_idx = torch.multinomial(word_weights, 1)[0]
            except:  # noqa: E722
                word_idx = torch.tensor(0)
            prob = decoder_output[word_idx] - logsumexp(decoder_output, dim=0)
            log_prob += prob
            input = word_idx.detach().unsqueeze(0).unsqueeze(0)
            decoded_ids.append(input.item())

        text = prefix + self.tokenizer.decode(decoded_ids)
        log_prob_float = log_prob.item()
        log_prob_float /= len(decoded_ids)
        if not self.is_forward_lm:
            text = text[::-1]
        return text, -log_prob_float


torch.manual_seed(0)
dictionary = Dictionary(string.printable)
language_model = LanguageModel(dictionary, is_forward_lm=True, hidden_size=128, nlayers=1, embedding_size=32)
language_model.eval()
for prefix in ["The meaning of life is", "\n"]:
    text, likelihood = language_model.generate_text(prefix, number_of_characters=400)
    print(len(text), round(likelihood, 3))
