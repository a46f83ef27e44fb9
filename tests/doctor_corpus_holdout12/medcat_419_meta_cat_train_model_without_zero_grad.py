# Source: https://github.com/CogStack/MedCAT/pull/419
#   code: medcat/utils/meta_cat/ml_utils.py (create_batch_piped_data, split_list_train_test,
#   print_report, train_model) at d1321b87^, the parent of the commit of the pull request that
#   adds model.zero_grad() to the training loop, and the MetaCAT LSTM of
#   medcat/utils/meta_cat/models.py
# Adapted: train_model's LSTM path kept as it was (config lr_scheduler off, cross_entropy loss,
#   no class weights, no auto-save; the BERT initialize_model branch dropped); sklearn's
#   classification_report (not installed) replaced by a stand-in that returns per-class
#   accuracy and the logger by print; ConfigMetaCAT by a namespace of the dicts train_model
#   reads; the LSTM shortened (one layer, no attention mask argument); 600 random documents of
#   24 token ids with a centre position and one of 2 labels; 3 epochs of batch 32; cpu, seeded.
import math
import random
import types

import numpy as np
import torch
from torch import nn, optim


def classification_report(y, pred, output_dict=False):
    y, pred = np.asarray(y), np.asarray(pred)
    report = {str(c): {'f1-score': float((pred[y == c] == c).mean()) if (y == c).any() else 0.0}
              for c in np.unique(y)}
    report['macro avg'] = {'f1-score': float(np.mean([v['f1-score'] for v in report.values()]))}
    return report if output_dict else str(report)


def create_batch_piped_data(data, start_ind, end_ind, device, pad_id):
    max_seq_len = max([len(x[0]) for x in data])
    x = [x[0][0:max_seq_len] + [pad_id]*max(0, max_seq_len - len(x[0])) for x in data[start_ind:end_ind]]
    cpos = [x[1] for x in data[start_ind:end_ind]]
    y = None
    if len(data[0]) == 3:
        # Means we have the y column
        y = torch.tensor([x[2] for x in data[start_ind:end_ind]], dtype=torch.long).to(device)

    x = torch.tensor(x, dtype=torch.long).to(device)
    cpos = torch.tensor(cpos, dtype=torch.long).to(device)

    return x, cpos, y


def split_list_train_test(data, test_size, shuffle=True):
    if shuffle:
        random.shuffle(data)

    test_ind = int(len(data) * test_size)
    test_data = data[:test_ind]
    train_data = data[test_ind:]

    return train_data, test_data


def print_report(epoch, running_loss, all_logits, y, name='Train'):
    if all_logits:
        print(f'Epoch: {epoch} ' + "*"*50 + f"  {name}")
        print(classification_report(y, np.argmax(np.concatenate(all_logits, axis=0), axis=1)))


class LSTM(nn.Module):
    def __init__(self, config):
        super(LSTM, self).__init__()
        self.config = config
        self.embeddings = nn.Embedding(config.general['vocab_size'], config.model['input_size'],
                                       padding_idx=config.model['padding_idx'])
        self.rnn = nn.LSTM(input_size=config.model['input_size'],
                           hidden_size=config.model['hidden_size'] // config.model['num_directions'],
                           num_layers=config.model['num_layers'], bidirectional=True)
        self.fc1 = nn.Linear(config.model['hidden_size'], config.model['nclasses'])
        self.d1 = nn.Dropout(config.model['dropout'])

    def forward(self, input_ids, center_positions, ignore_cpos=False):
        x = self.embeddings(input_ids).permute(1, 0, 2)
        x, hidden = self.rnn(x)
        x = x.permute(1, 0, 2)
        row_indices = torch.arange(0, x.size(0)).long()
        x = x[row_indices, center_positions, :]
        x = self.d1(x)
        x = self.fc1(x)
        return x


def train_model(model, data, config, save_dir_path=None):
    # Get train/test from data
    train_data, test_data = split_list_train_test(data, test_size=config.train['test_size'], shuffle=config.train['shuffle_data'])
    device = torch.device(config.general['device']) # Create a torch device

    criterion = nn.CrossEntropyLoss()  # Set the criterion to Cross Entropy Loss

    parameters = filter(lambda p: p.requires_grad, model.parameters())

    batch_size = config.train['batch_size']
    batch_size_eval = config.general['batch_size_eval']
    pad_id = config.model['padding_idx']
    nepochs = config.train['nepochs']
    ignore_cpos = config.model['ignore_cpos']
    num_batches = math.ceil(len(train_data) / batch_size)
    num_batches_test = math.ceil(len(test_data) / batch_size_eval)
    optimizer = optim.Adam(parameters, lr=config.train['lr'],weight_decay=1e-5)

    model.to(device)  # Move the model to device

    # Can be pre-calculated for the whole dataset
    y_test = [x[2] for x in test_data]
    y_train = [x[2] for x in train_data]

    winner_report = {}
    for epoch in range(nepochs):
        running_loss = []
        all_logits = []
        model.train()
        for i in range(num_batches):
            x, cpos, y = create_batch_piped_data(train_data, i*batch_size, (i+1)*batch_size, device=device, pad_id=pad_id)
            logits = model(x, center_positions=cpos, ignore_cpos=ignore_cpos)
            loss = criterion(logits, y)
            loss.backward()
            # Track loss and logits
            running_loss.append(loss.item())
            all_logits.append(logits.detach().cpu().numpy())

            parameters = filter(lambda p: p.requires_grad, model.parameters())
            nn.utils.clip_grad_norm_(parameters, 0.15)
            optimizer.step()

        all_logits_test = []
        running_loss_test = []
        model.eval()

        with torch.no_grad():
            for i in range(num_batches_test):
                x, cpos, y = create_batch_piped_data(test_data, i*batch_size_eval, (i+1)*batch_size_eval, device=device, pad_id=pad_id)
                logits = model(x, cpos, ignore_cpos=ignore_cpos)

                # Track loss and logits
                running_loss_test.append(loss.item())
                all_logits_test.append(logits.detach().cpu().numpy())

        print_report(epoch, running_loss, all_logits, y=y_train, name='Train')
        print_report(epoch, running_loss_test, all_logits_test, y=y_test, name='Test')

        _report = classification_report(y_test, np.argmax(np.concatenate(all_logits_test, axis=0), axis=1), output_dict=True)
        if not winner_report or _report[config.train['metric']['base']][config.train['metric']['score']] > \
                winner_report['report'][config.train['metric']['base']][config.train['metric']['score']]:
            winner_report['report'] = _report
            winner_report['epoch'] = epoch

    return winner_report


config = types.SimpleNamespace(
    general={'device': 'cpu', 'batch_size_eval': 64, 'vocab_size': 500},
    model={'padding_idx': 0, 'ignore_cpos': False, 'input_size': 32, 'hidden_size': 64,
           'num_directions': 2, 'num_layers': 1, 'nclasses': 2, 'dropout': 0.5},
    train={'test_size': 0.2, 'shuffle_data': True, 'batch_size': 32, 'nepochs': 3, 'lr': 0.001,
           'metric': {'base': 'macro avg', 'score': 'f1-score'}})

random.seed(0)
np.random.seed(0)
torch.manual_seed(0)
data = [[[random.randint(1, 499) for _ in range(24)], random.randint(0, 23), random.randint(0, 1)]
        for _ in range(600)]
model = LSTM(config)
print(train_model(model, data, config))
