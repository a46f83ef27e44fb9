# Source: https://github.com/pytorch/pytorch/issues/599
# Adapted: the training script kept as posted with smaller sizes (input_size = batch_size = 64
#   instead of 512, hidden_size 32 instead of 256, 50 time steps instead of 300: the loss
#   reshapes output and target with view(-1, input_size), which needs batch_size ==
#   input_size as in the post), 150 epochs instead of 5000; the stored copy stops at
#   `optimize`, completed as `optimizer.step()` and the epoch's time printed every 50 epochs;
#   `Variable(...)` kept (it returns the tensor), `.cuda()` dropped (cpu);
#   `nn.RNNBase('LSTM', ...)` -> `nn.LSTM(...)` (RNNBase no longer has a forward of its own;
#   nn.LSTM is the same module with mode 'LSTM'); seeded.
import torch
import torch.optim as optim
import torch.nn as nn
import time
from torch.autograd import Variable

torch.backends.cudnn.enabled=False
torch.manual_seed(0)

input_size = 64
hidden_size = 32
batch_size = 64
time_steps = 50
lr   = 4e-2

model = nn.LSTM(input_size, hidden_size, 1)

optimizer = optim.SGD(model.parameters(),
                      lr = lr,
                      momentum=0.9,
                      dampening = 0.0,
                      weight_decay = 0.0
                     )

criterion = nn.MSELoss()

train_data = torch.randn(time_steps, batch_size, input_size)

hidden = (Variable(torch.zeros(1, batch_size, hidden_size)),
          Variable(torch.zeros(1, batch_size, hidden_size)))
target = Variable(torch.randn(time_steps-1, input_size, hidden_size))
input = Variable(train_data[0:time_steps-1])

for epoch in range(150):

    start = time.time()
    loss = 0
    model.zero_grad()
    hidden[0].data.fill_(0.0)
    hidden[1].data.fill_(0.0)

    output, loss = model(input, hidden)

    loss = criterion(output.view(-1, input_size), target.view(-1, input_size))
    loss.backward()

    optimizer.step()
    if epoch % 50 == 0:
        print(epoch, time.time() - start)
