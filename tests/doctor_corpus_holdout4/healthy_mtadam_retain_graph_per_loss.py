# Source: https://github.com/ItzikMalkiel/MTAdam/issues/2
#   code: mtadam.py (MTAdam) and main.py at commit 799fc61, the version the issue was filed
#   against
# Adapted: MTAdam kept as it was and defined in the script (its unused tensorflow import
#   dropped), main.py's Net, unbalanced_loss, train, test and main kept; cuda -> cpu (the
#   `.cuda()` and `.to("cuda")` calls of both files); torchvision's MNIST (not installed)
#   replaced by a TensorDataset of random 1x28x28 images and labels, 192 for training in
#   batches of 16 and 100 for testing; command-line arguments parsed from an empty list; one
#   round instead of 10, with the MTAdam run only (the two Adam runs dropped); tqdm dropped;
#   seeded.
from __future__ import print_function
import argparse
import math
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.optimizer import Optimizer
class MTAdam(Optimizer):
    r"""Implements MTAdam algorithm.

    Arguments:
        params (iterable): iterable of parameters to optimize or dicts defining
            parameter groups
        lr (float, optional): learning rate (default: 1e-3)
        betas (Tuple[float, float], optional): coefficients used for computing
            running averages of gradient and its square (default: (0.9, 0.999))
        eps (float, optional): term added to the denominator to improve
            numerical stability (default: 1e-8)
        weight_decay (float, optional): weight decay (L2 penalty) (default: 0)
        amsgrad (boolean, optional): whether to use the AMSGrad variant of this
            algorithm from the paper `On the Convergence of Adam and Beyond`_
            (default: False)

    """
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999, 0.9), eps=1e-8,
                 weight_decay=0, amsgrad=False):
        if not 0.0 <= lr:
            raise ValueError("Invalid learning rate: {}".format(lr))
        if not 0.0 <= eps:
            raise ValueError("Invalid epsilon value: {}".format(eps))
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError("Invalid beta parameter at index 0: {}".format(betas[0]))
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError("Invalid beta parameter at index 1: {}".format(betas[1]))
        if not 0.0 <= weight_decay:
            raise ValueError("Invalid weight_decay value: {}".format(weight_decay))
        defaults = dict(lr=lr, betas=betas, eps=eps,
                        weight_decay=weight_decay, amsgrad=amsgrad)
        super(MTAdam, self).__init__(params, defaults)

        self.total_grad = 0
        self.training_step = 0

    def __setstate__(self, state):
        super(MTAdam, self).__setstate__(state)
        for group in self.param_groups:
            group.setdefault('amsgrad', False)

    # assuming feature_map has requires_grad=True)
    # compared to adam, these are the added objects: loss_array, ranks, feature_map,
    @torch.no_grad()
    def step(self, loss_array, ranks, feature_map, closure=None):
        """Performs a single optimization step.

        Arguments:
            closure (callable, optional): A closure that reevaluates the model
                and returns the loss.
        """

        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()

        self.update_weights(loss_array, ranks)

        return loss

    def update_weights(self, loss_array, ranks):

      for loss_index, loss in enumerate(loss_array):
        loss.backward(retain_graph=True)
        for group in self.param_groups:
          for p in group['params']:

            if p.grad is None:
              print("breaking")
              break

            if p.grad.is_sparse:
              raise RuntimeError('MTAdam does not support sparse gradients')

            amsgrad = group['amsgrad']

            state = self.state[p]

            # State initialization
            if len(state) == 0:
              state['step'] = 1
              for j, _ in enumerate(loss_array):
                # Exponential moving average of gradient values
                state['exp_avg'+str(j)] = torch.zeros_like(p.data)
                # Exponential moving average of squared gradient values
                state['exp_avg_sq'+str(j)] = torch.zeros_like(p.data)
                if amsgrad:
                  # Maintains max of all exp. moving avg. of sq. grad. values
                  state['max_exp_avg_sq'+str(j)] = torch.zeros_like(p.data)

                if j == 0: p.norms = [torch.ones(1)]
                else: p.norms.append(torch.ones(1))

            beta1, beta2, beta3 = group['betas']

            # normalize the norm of current loss gradients to be the same as the anchor
            if state['step'] == 1:
              p.norms[loss_index] = torch.norm(p.grad)
            else:
              p.norms[loss_index] = (p.norms[loss_index]*beta3) + ((1-beta3)*torch.norm(p.grad))
            if p.norms[loss_index] > 1e-10:
              for anchor_index in range(len(loss_array)):
                if p.norms[anchor_index] > 1e-10:
                  p.grad = ranks[loss_index] * p.norms[anchor_index] * p.grad / p.norms[loss_index]
                  break

            exp_avg, exp_avg_sq = state['exp_avg'+str(loss_index)], state['exp_avg_sq'+str(loss_index)]
            if amsgrad:
              max_exp_avg_sq = state['max_exp_avg_sq'+str(loss_index)]

            bias_correction1 = 1 - beta1 ** state['step']
            bias_correction2 = 1 - beta2 ** state['step']
            if loss_index == len(loss_array) - 1:
              state['step'] += 1

            if group['weight_decay'] != 0:
              p.grad = p.grad.add(p, alpha=group['weight_decay'])

            exp_avg.mul_(beta1).add_(p.grad, alpha=1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
            if amsgrad:
              # Maintains the maximum of all 2nd moment running avg. till now
              torch.max(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq)
              # Use the max. for normalizing running avg. of gradient
              denom = (max_exp_avg_sq.sqrt() / math.sqrt(bias_correction2)).add_(group['eps'])
            else:
              denom = (exp_avg_sq.sqrt() / math.sqrt(bias_correction2)).add_(group['eps'])

            step_size = group['lr'] / bias_correction1

            if loss_index == 0 or not hasattr(p, 'exp_avg'):
              p.exp_avg = [exp_avg]
              p.denom = [denom]
              p.step_size = [step_size]
            else:
              p.exp_avg.append(exp_avg)
              p.denom.append(denom)
              p.step_size.append(step_size)
            if p.grad is not None:
              p.grad.detach_()
              p.grad.zero_()

      for group in self.param_groups:
        for p in group['params']:
          temp = 0
          max_denom = p.denom[0]
          for index in range(1, len(p.exp_avg)):
              max_denom = torch.max(max_denom, p.denom[index])

          for index in range(len(p.exp_avg)):
            update_step = -p.step_size[index]*(p.exp_avg[index]/max_denom)
            temp += update_step
          p.add_(temp)

      self.training_step += 1

class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout2d(0.25)
        self.dropout2 = nn.Dropout2d(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = self.conv1(x)
        x = F.relu(x)
        x = self.conv2(x)
        x = F.relu(x)
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = self.fc1(x)
        x = F.relu(x)
        x = self.dropout2(x)
        x = self.fc2(x)
        output = F.log_softmax(x, dim=1)
        return output

def unbalanced_loss(output, target, loss_weights):
    loss_array = []
    for i in range(10):
        one_class_imbalanced_weights = torch.zeros(10)
        one_class_imbalanced_weights = one_class_imbalanced_weights.to("cpu") # TODO do it elegant
        one_class_imbalanced_weights[i] = loss_weights[i]
        loss = F.nll_loss(output, target, weight=one_class_imbalanced_weights)
        loss_array.append(loss)

    return loss_array

def train(args, model, device, train_loader, optimizer, epoch, use_MTAdam, use_Unbalanced, loss_weights):
    model.train()

    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        if use_MTAdam:
            loss_array = unbalanced_loss(output, target, loss_weights)
            ranks = [1]*10
            optimizer.step(loss_array, ranks, None)

            # if batch_idx % 1 == 0:
            #     print('Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}'.format(
            #         epoch, batch_idx * len(data), len(train_loader.dataset),
            #         100. * batch_idx / len(train_loader), loss_array[0].item()))
        else:
            if use_Unbalanced:
                loss = F.nll_loss(output, target, weight=loss_weights)
            else:
                loss = F.nll_loss(output, target)
            loss.backward()
            optimizer.step()
            # if batch_idx % args.log_interval == 0:
            #     print('Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}'.format(
            #         epoch, batch_idx * len(data), len(train_loader.dataset),
            #         100. * batch_idx / len(train_loader), loss.item()))


def test(model, device, test_loader):
    model.eval()
    test_loss = 0
    correct = 0
    with torch.no_grad():
        for data, target in test_loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction='sum').item()  # sum up batch loss
            pred = output.argmax(dim=1, keepdim=True)  # get the index of the max log-probability
            correct += pred.eq(target.view_as(pred)).sum().item()

    test_loss /= len(test_loader.dataset)

    # print('\nTest set: Average loss: {:.4f}, Accuracy: {}/{} ({:.0f}%)'.format(
    #     test_loss, correct, len(test_loader.dataset),
    #     100. * correct / len(test_loader.dataset)))

    return correct / len(test_loader.dataset)


def make_loader(n, batch_size):
    images = torch.randn(n, 1, 28, 28)
    labels = torch.randint(0, 10, (n,))
    dataset = torch.utils.data.TensorDataset(images, labels)
    dataset.dataset = dataset
    return torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=True)


def main(use_MTAdam, use_Unbalanced, loss_weights):
    # Training settings
    parser = argparse.ArgumentParser(description='PyTorch MNIST Example')
    parser.add_argument('--batch-size', type=int, default=64, metavar='N',
                        help='input batch size for training (default: 64)')
    parser.add_argument('--test-batch-size', type=int, default=1000, metavar='N',
                        help='input batch size for testing (default: 1000)')
    parser.add_argument('--epochs', type=int, default=1, metavar='N',
                        help='number of epochs to train (default: 1)')
    parser.add_argument('--lr', type=float, default=1.0, metavar='LR',
                        help='learning rate (default: 1.0)')
    parser.add_argument('--gamma', type=float, default=0.7, metavar='M',
                        help='Learning rate step gamma (default: 0.7)')
    parser.add_argument('--no-cuda', action='store_true', default=False,
                        help='disables CUDA training')
    parser.add_argument('--seed', type=int, default=1, metavar='S',
                        help='random seed (default: 1)')
    parser.add_argument('--log-interval', type=int, default=10, metavar='N',
                        help='how many batches to wait before logging training status')
    parser.add_argument('--save-model', action='store_true', default=False,
                        help='For Saving the current Model')
    args = parser.parse_args([])
    use_cuda = not args.no_cuda and torch.cuda.is_available()

    torch.manual_seed(args.seed)

    device = torch.device("cuda" if use_cuda else "cpu")

    train_loader = make_loader(192, 16)
    test_loader = make_loader(100, 100)

    model = Net().to(device)
    lr = 0.001
    if use_MTAdam:
        optimizer = MTAdam(model.parameters(), lr=lr)
    else:
        optimizer = optim.Adam(model.parameters(), lr=lr)

    for epoch in range(1, args.epochs + 1):
        train(args, model, device, train_loader, optimizer, epoch, use_MTAdam, use_Unbalanced, loss_weights)

    if args.save_model:
        torch.save(model.state_dict(), "mnist_cnn.pt")

    return test(model, device, test_loader)


if __name__ == '__main__':
    gpu_index = 0
    print("using gpu #" + str(gpu_index))
    os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu_index)

    np.random.seed(0)
    torch.manual_seed(0)

    mtadam = []
    adam = []
    balanced = []

    for i in range(1):
        loss_weights = np.ones(10)
        loss_weights[1:] = np.random.rand(9) * 1000
        loss_weights = torch.tensor(loss_weights).float()
        loss_weights = loss_weights.to("cpu")
        mtadam.append(main(True, True, loss_weights))

        print("=========== round " + str(i) + " ===========")
        print('\nUnbalanced MTAdam: mean: {} STD: {}'.format(np.mean(mtadam), np.std(mtadam)))
