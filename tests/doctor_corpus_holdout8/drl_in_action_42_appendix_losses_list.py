# Source: https://github.com/DeepReinforcementLearning/DeepReinforcementLearningInAction/issues/42
# Adapted: the Appendix A.4 code posted in the issue kept as it is; torchvision's MNIST (not
#   installed, no download) -> an object with the same train_data and train_labels fields holding
#   6000 random 28x28 uint8 images and labels; epochs 2500 -> 300, batch_size 1000 -> 200; the
#   matplotlib figures dropped (the final plt.plot(losses) is the call that fails in the issue;
#   the losses are printed instead as numbers); cpu, seeded.
import torch
import numpy as np
from types import SimpleNamespace


def nn(x, w1, w2):
    l1 = x @ w1
    l1 = torch.relu(l1)
    l2 = l1 @ w2
    return l2


torch.manual_seed(0)
np.random.seed(0)
w1 = torch.randn(784, 200, requires_grad=True)
w2 = torch.randn(200, 10, requires_grad=True)

mnist_data = SimpleNamespace(train_data=torch.randint(0, 256, (6000, 28, 28), dtype=torch.uint8),
                             train_labels=torch.randint(0, 10, (6000,)))

lr = 0.0001
epochs = 300
batch_size = 200
losses = []
lossfn = torch.nn.CrossEntropyLoss()
for i in range(epochs):
    rid = np.random.randint(0, mnist_data.train_data.shape[0], size=batch_size)
    x = mnist_data.train_data[rid].float().flatten(start_dim=1)
    x /= x.max()
    pred = nn(x, w1, w2)
    target = mnist_data.train_labels[rid]
    loss = lossfn(pred, target)
    losses.append(loss)
    loss.backward()
    with torch.no_grad():
        w1 -= lr * w1.grad
        w2 -= lr * w2.grad

print([round(float(l.detach()), 2) for l in losses[::50]])
