# Source: https://github.com/namisan/mt-dnn/pull/92
#   code: experiments/glue/glue_utils.py (eval_model), mt_dnn/model.py (MTDNNModel.predict), predict.py at the parent of 72a1d1d0
# Adapted: the BERT-based SANBertNetwork is replaced by a small embedding + TransformerEncoderLayer +
# per-task classifier with the same call signature, the batch generator by a stub yielding
# (batch_meta, batch_data) pairs of random token ids, calc_metrics by accuracy; the checkpoint loading
# is dropped; 120 dev batches of 16 sequences of 64 tokens are scored on CPU (no training).
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class TaskType:
    Classification = 1
    Regression = 2
    Ranking = 3


class SANBertNetwork(nn.Module):
    def __init__(self, vocab_size=5000, hidden_size=256, n_class=3):
        super().__init__()
        self.embeddings = nn.Embedding(vocab_size, hidden_size)
        self.segment = nn.Embedding(2, hidden_size)
        self.encoder = nn.TransformerEncoderLayer(hidden_size, 4, dim_feedforward=512, batch_first=True)
        self.pooler = nn.Sequential(nn.Linear(hidden_size, hidden_size), nn.Tanh())
        self.scoring_list = nn.ModuleList([nn.Linear(hidden_size, n_class)])

    def forward(self, input_ids, token_type_ids, attention_mask, premise_mask=None, hyp_mask=None, task_id=0):
        x = self.embeddings(input_ids) + self.segment(token_type_ids)
        x = self.encoder(x, src_key_padding_mask=attention_mask == 0)
        pooled_output = self.pooler(x[:, 0])
        return self.scoring_list[task_id](pooled_output)


class MTDNNModel(object):
    def __init__(self, config):
        self.config = config
        self.network = SANBertNetwork()
        self.mnetwork = self.network

    def predict(self, batch_meta, batch_data):
        self.network.eval()
        task_id = batch_meta['task_id']
        task_type = batch_meta['task_type']
        inputs = batch_data[:batch_meta['input_len']]
        if len(inputs) == 3:
            inputs.append(None)
            inputs.append(None)
        inputs.append(task_id)
        score = self.mnetwork(*inputs)
        if task_type == TaskType.Classification:
            score = F.softmax(score, dim=1)
        score = score.data.cpu()
        score = score.numpy()
        predict = np.argmax(score, axis=1).tolist()
        score = score.reshape(-1).tolist()
        return score, predict, batch_meta['label']


class BatchGen:
    def __init__(self, n_batches, batch_size=16, seq_len=64):
        self.n_batches, self.batch_size, self.seq_len = n_batches, batch_size, seq_len

    def reset(self):
        self.offset = 0

    def __iter__(self):
        for i in range(self.n_batches):
            ids = torch.randint(1, 5000, (self.batch_size, self.seq_len))
            batch_data = [ids, torch.zeros_like(ids), torch.ones_like(ids)]
            batch_meta = {'task_id': 0, 'task_type': TaskType.Classification, 'input_len': 3,
                          'uids': [f'dev-{i}-{j}' for j in range(self.batch_size)],
                          'label': np.random.randint(0, 3, self.batch_size).tolist()}
            yield batch_meta, batch_data


def calc_metrics(metric_meta, golds, predictions, scores):
    return {name: float(np.mean(np.array(golds) == np.array(predictions))) * 100 for name in metric_meta}


def eval_model(model, data, metric_meta, use_cuda=True, with_label=True):
    data.reset()
    if use_cuda:
        model.cuda()
    predictions = []
    golds = []
    scores = []
    ids = []
    metrics = {}
    for batch_meta, batch_data in data:
        score, pred, gold = model.predict(batch_meta, batch_data)
        predictions.extend(pred)
        golds.extend(gold)
        scores.extend(score)
        ids.extend(batch_meta['uids'])
    if with_label:
        metrics = calc_metrics(metric_meta, golds, predictions, scores)
    return metrics, predictions, scores, golds, ids


config = {"cuda": False}
model = MTDNNModel(config)
test_data = BatchGen(120)
test_metrics, test_predictions, scores, golds, test_ids = eval_model(model, test_data, metric_meta=('ACC',),
                                                                     use_cuda=config["cuda"], with_label=True)
print(test_metrics, len(test_predictions), len(scores))
