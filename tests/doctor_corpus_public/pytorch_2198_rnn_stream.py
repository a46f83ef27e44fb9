# Source: https://github.com/pytorch/pytorch/issues/2198 (the loop as posted in the thread)
# Adapted: only the loop was posted: rnn, input_size and the initial hidden state are defined
#   around it (an LSTM fed 16 x input_size chunks), Variable kept, cuda -> cpu, 80 chunks
#   instead of 10000.
import torch
import torch.nn as nn
from torch.autograd import Variable

torch.manual_seed(0)
input_size = 32
hidden_size = 64
rnn = nn.LSTM(input_size, hidden_size)
hidden = (torch.zeros(1, hidden_size), torch.zeros(1, hidden_size))

for i in range(80):
    data = Variable(torch.rand(16,input_size))
    out, hidden = rnn(data, hidden)

print(out.shape, hidden[0].norm().item())
