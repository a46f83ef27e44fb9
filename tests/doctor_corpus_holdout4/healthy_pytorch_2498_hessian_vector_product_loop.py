# Source: https://github.com/pytorch/pytorch/issues/2498
# Adapted: the posted Hessian-vector product loop kept; the stored issue stops inside the
#   second torch.autograd.grad call, completed as the issue describes it (the product of
#   the Hessian with the fixed random vector v, taken with respect to net.parameters());
#   VGG replaced by a small VGG-style network (3x3 convolutions, ReLU, max pooling, a linear
#   classifier with log_softmax), the CIFAR-10 loader by 15 batches of 8 random 3x32x32
#   images and labels (batchSize 8), Variable(...) written as plain tensors, .cuda() -> cpu,
#   a print of the product's norm every 5 batches added, seeded.
import torch
import torch.nn as nn
import torch.nn.functional as F


class VGG(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2, 2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2, 2),
            nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2, 2))
        self.classifier = nn.Linear(64 * 4 * 4, num_classes)

    def forward(self, x):
        x = self.features(x)
        return F.log_softmax(self.classifier(torch.flatten(x, 1)), dim=1)


torch.manual_seed(0)
dataloader = [(torch.rand(8, 3, 32, 32), torch.randint(0, 10, (8,))) for _ in range(15)]

net = VGG() # could be other model
loss_f = nn.NLLLoss()
v = []
for i, p in enumerate(net.parameters()):
    v.append(torch.FloatTensor(p.data.size()).normal_(0, 1))
for step, (img, label) in enumerate(dataloader):
    input = img.clone().requires_grad_(True)
    target = label
    output = net(input)
    loss = loss_f(output, target)
    grad_params = torch.autograd.grad(loss, net.parameters(), create_graph=True)
    inner_prod = 0.0
    for vi, grad in zip(v, grad_params):
        inner_prod += torch.sum(grad * vi)
    Hv = torch.autograd.grad(inner_prod, net.parameters())
    if step % 5 == 0:
        print(step, sum(h.norm() ** 2 for h in Hv).sqrt().item())
