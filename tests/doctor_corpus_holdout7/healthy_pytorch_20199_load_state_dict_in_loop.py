# Source: https://github.com/pytorch/pytorch/issues/20199
# Adapted: the notebook session of the thread kept (a bidirectional LSTM and a fake input;
#   the stored comment stops at the input), completed as the thread describes it: a loop that
#   loads a fresh copy of the weights with load_state_dict and runs the LSTM, with the
#   gc.collect() the reporter comments out left commented out; LSTM(1024, 1024) reduced to
#   LSTM(512, 512), .cuda() dropped (cpu), 40 iterations, seeded.
import gc

import torch

torch.manual_seed(0)
blstm = torch.nn.LSTM(512, 512, bidirectional=True)
fake_input = torch.Tensor(10, 10, 512).uniform_()

for i in range(40):
    state_dict = {k: v.clone() for k, v in blstm.state_dict().items()}
    blstm.load_state_dict(state_dict)
    output, _ = blstm(fake_input)
    # gc.collect()
    if i % 10 == 0:
        print(i, output.sum().item())
