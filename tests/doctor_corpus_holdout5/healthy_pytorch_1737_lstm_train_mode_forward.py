# Source: https://github.com/pytorch/pytorch/issues/1737
# Adapted: the snippet kept as posted (cuDNN disabled as in the post, `.cuda()` dropped: cpu);
#   the stored copy stops at `c0 = ...`, completed as its h0 line and a loop of 2000 forward
#   passes of the LSTM on `encoded` from (h0, c0), printing get_num_tensors() every 250 as the
#   reporter's helper is meant for; `torch.FloatTensor(batch_size, 1, wordvec_dim)` is filled
#   with random values (it is uninitialised in the post); seeded.
from __future__ import absolute_import
from __future__ import division
from __future__ import print_function
from __future__ import unicode_literals

import torch
torch.backends.cudnn.enabled = False
import torch.cuda
import torch.nn as nn
from torch.autograd import Variable
import gc

print(torch.version.__version__)


def get_num_tensors():
    ctr = 0
    for obj in gc.get_objects():
        if torch.is_tensor(obj):
            ctr += 1
    return ctr


torch.manual_seed(0)
wordvec_dim = 300
hidden_dim = 256
rnn_num_layers = 1
batch_size = 10
vocab_size = 100
rnn_dropout = 0.5

model = nn.LSTM(wordvec_dim, hidden_dim, rnn_num_layers,
                           dropout=rnn_dropout, batch_first=True)
# set training mode
model.train()

encoded = Variable(torch.FloatTensor(batch_size, 1, wordvec_dim).uniform_())

h0 = Variable(torch.zeros(rnn_num_layers, batch_size, hidden_dim))
c0 = Variable(torch.zeros(rnn_num_layers, batch_size, hidden_dim))

for i in range(2000):
    output, (hn, cn) = model(encoded, (h0, c0))
    if i % 250 == 0:
        print(i, get_num_tensors())
