# Source: https://github.com/pytorch/pytorch/issues/109445
# Adapted: 300 epochs instead of 1000000, seeded; the reporter's commented-out alternatives
#   (dense and COO parameters) and the comments marking which line "works" removed, as was a
#   comment glued to the loop line in the post.
import torch

class my_net(torch.nn.Module):
    def __init__(self):
        super(my_net, self).__init__()
        self.A = torch.nn.Parameter(torch.rand(100, 100).to_sparse_csr())
        self.B = torch.nn.Parameter(torch.rand(1, 100))

    def forward(self, u, state): # u not used for simplicity
        state = torch.sparse.mm(self.A, state)
        y = torch.sparse.mm(self.B, state)
        return state, y

torch.manual_seed(0)
rnn_net = my_net()

for epoch in range(300):
    print(f"epoch {epoch}")

    rnn_net.zero_grad()
    state = torch.zeros(100,1)
    for ii in range(2):
        state, output = rnn_net.forward(torch.tensor([[0]]), state)
    output.backward()
