# Source: https://github.com/pytorch/pytorch/issues/1478
# Adapted: Python 2 -> 3, cuda -> cpu, 60 samples instead of 100000, seeded.
import torch
from torch.autograd import Variable
import torch.nn as nn

torch.manual_seed(0)

#Function to make dummy data.
def datagen(batch_size, seq_length,  vector_dim):
    return torch.rand(seq_length, batch_size,  vector_dim)

samples = 60
batch_size = 32
sequence_len = 20
vector_dim = 10

lstm =  nn.LSTM(vector_dim, vector_dim)

for sample in range(samples):

    input = Variable(datagen(batch_size, sequence_len, vector_dim), requires_grad = True)

    # Instantiating new c0 and h0 on every forward...I hope
    c0 = Variable(torch.rand(lstm.num_layers, batch_size, lstm.hidden_size), requires_grad=False)
    h0 = Variable(torch.rand(lstm.num_layers, batch_size, lstm.hidden_size), requires_grad=False)

    hidden, output = lstm(input, (h0, c0))
