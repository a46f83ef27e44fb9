# Source: https://github.com/huggingface/transformers/issues/4957
# Adapted: the tokenize_qa and inference code kept as posted, run 60 times over
#   random questions and contexts as the reporter runs it repeatedly, with the answer span
#   read from the scores; transformers is not installed and the
#   bert-large-uncased-whole-word-masking-finetuned-squad checkpoint cannot be loaded, so the
#   tokenizer is a whitespace word-id tokenizer with the used methods (encode with
#   max_length, convert_ids_to_tokens, sep_token_id) and the model a small stand-in with the
#   same call (input ids, token_type_ids) returning (start_scores, end_scores); device 'cuda'
#   -> 'cpu', seeded.
import random

import torch
import torch.nn as nn


class AutoTokenizer:
    cls_token_id, sep_token_id = 1, 2

    def __init__(self):
        self.vocab = {"[PAD]": 0, "[CLS]": 1, "[SEP]": 2}

    @classmethod
    def from_pretrained(cls, name):
        return cls()

    def _ids(self, text):
        return [self.vocab.setdefault(w, len(self.vocab)) for w in text.lower().split()]

    def encode(self, question, context, max_length=512):
        ids = [self.cls_token_id] + self._ids(question) + [self.sep_token_id] + self._ids(context)
        return ids[:max_length - 1] + [self.sep_token_id]

    def convert_ids_to_tokens(self, ids):
        inverse = {i: w for w, i in self.vocab.items()}
        return [inverse[i] for i in ids]


class AutoModelForQuestionAnswering(nn.Module):
    def __init__(self, vocab_size=5000, hidden=128):
        super().__init__()
        self.embeddings = nn.Embedding(vocab_size, hidden)
        self.token_type_embeddings = nn.Embedding(2, hidden)
        self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(hidden, 4, 4 * hidden, batch_first=True), 2,
                                             enable_nested_tensor=False)
        self.qa_outputs = nn.Linear(hidden, 2)

    @classmethod
    def from_pretrained(cls, name):
        return cls()

    def forward(self, input_ids, token_type_ids=None):
        h = self.encoder(self.embeddings(input_ids) + self.token_type_embeddings(token_type_ids))
        start_logits, end_logits = self.qa_outputs(h).split(1, dim=-1)
        return start_logits.squeeze(-1), end_logits.squeeze(-1)


torch.manual_seed(0)
random.seed(0)
tokenizer = AutoTokenizer.from_pretrained("bert-large-uncased-whole-word-masking-finetuned-squad")
model = AutoModelForQuestionAnswering.from_pretrained("bert-large-uncased-whole-word-masking-finetuned-squad")

device = 'cpu'
question = 'what is your question'
answer = 'This is the  answer'


def tokenize_qa(tokenizer, question, answer_context):
    input_ids = tokenizer.encode(question, answer_context, max_length=512)
    tokens = tokenizer.convert_ids_to_tokens(input_ids)
    sep_index = input_ids.index(tokenizer.sep_token_id)
    num_seg_a = sep_index + 1
    num_seg_b = len(input_ids) - num_seg_a
    segment_ids = [0] * num_seg_a + [1] * num_seg_b
    assert len(segment_ids) == len(input_ids)
    return input_ids, segment_ids, tokens


words = ['word{}'.format(k) for k in range(2000)]
answers = []
for run in range(60):
    question = ' '.join(random.choices(words, k=8))
    answer_context = ' '.join(random.choices(words, k=300))
    input_ids, segment_ids, tokens = tokenize_qa(tokenizer, question, answer_context)
    start_scores, end_scores = model(torch.tensor([input_ids], device=device),
                                     token_type_ids=torch.tensor([segment_ids], device=device))
    answer_start, answer_end = torch.argmax(start_scores).item(), torch.argmax(end_scores).item()
    answers.append(' '.join(tokens[answer_start:answer_end + 1]))
print(len(answers), sum(len(a) for a in answers))
