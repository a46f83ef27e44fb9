# Source: https://github.com/dragen1860/MAML-Pytorch/issues/23
#   code: meta.py (class Meta, forward) and the training loop of omniglot_train.py at the
#   repository head (98a00d4)
# Adapted: Meta.forward kept as it was (finetunning and clip_grad_by_norm_, unused here,
#   dropped); the Learner built from a config list replaced by a functional two-layer
#   perceptron with the same net(x, vars, bn_training) / parameters() interface; the Omniglot
#   n-way k-shot batches by random 5-way 1-shot tasks of 64 features (4 tasks per meta-batch,
#   15 queries per class), update_step=5, 30 meta-steps; cpu, seeded.
import numpy as np
import torch
from torch import nn
from torch import optim
from torch.nn import functional as F


class Learner(nn.Module):
    def __init__(self, n_in, n_hidden, n_way):
        super(Learner, self).__init__()
        self.vars = nn.ParameterList([
            nn.Parameter(torch.randn(n_hidden, n_in) * 0.1), nn.Parameter(torch.zeros(n_hidden)),
            nn.Parameter(torch.randn(n_way, n_hidden) * 0.1), nn.Parameter(torch.zeros(n_way))])

    def forward(self, x, vars=None, bn_training=True):
        if vars is None:
            vars = self.vars
        w1, b1, w2, b2 = vars
        x = F.relu(F.linear(x, w1, b1))
        return F.linear(x, w2, b2)

    def parameters(self):
        return self.vars


class Meta(nn.Module):
    def __init__(self, args):
        super(Meta, self).__init__()
        self.update_lr = args.update_lr
        self.meta_lr = args.meta_lr
        self.n_way = args.n_way
        self.update_step = args.update_step
        self.net = Learner(64, 128, args.n_way)
        self.meta_optim = optim.Adam(self.net.parameters(), lr=self.meta_lr)

    def forward(self, x_spt, y_spt, x_qry, y_qry):
        task_num, setsz, d = x_spt.size()
        querysz = x_qry.size(1)

        losses_q = [0 for _ in range(self.update_step + 1)]
        corrects = [0 for _ in range(self.update_step + 1)]

        for i in range(task_num):

            logits = self.net(x_spt[i], vars=None, bn_training=True)
            loss = F.cross_entropy(logits, y_spt[i])
            grad = torch.autograd.grad(loss, self.net.parameters())
            fast_weights = list(map(lambda p: p[1] - self.update_lr * p[0], zip(grad, self.net.parameters())))

            with torch.no_grad():
                logits_q = self.net(x_qry[i], self.net.parameters(), bn_training=True)
                loss_q = F.cross_entropy(logits_q, y_qry[i])
                losses_q[0] += loss_q

                pred_q = F.softmax(logits_q, dim=1).argmax(dim=1)
                correct = torch.eq(pred_q, y_qry[i]).sum().item()
                corrects[0] = corrects[0] + correct

            with torch.no_grad():
                logits_q = self.net(x_qry[i], fast_weights, bn_training=True)
                loss_q = F.cross_entropy(logits_q, y_qry[i])
                losses_q[1] += loss_q
                pred_q = F.softmax(logits_q, dim=1).argmax(dim=1)
                correct = torch.eq(pred_q, y_qry[i]).sum().item()
                corrects[1] = corrects[1] + correct

            for k in range(1, self.update_step):
                logits = self.net(x_spt[i], fast_weights, bn_training=True)
                loss = F.cross_entropy(logits, y_spt[i])
                grad = torch.autograd.grad(loss, fast_weights)
                fast_weights = list(map(lambda p: p[1] - self.update_lr * p[0], zip(grad, fast_weights)))

                logits_q = self.net(x_qry[i], fast_weights, bn_training=True)
                loss_q = F.cross_entropy(logits_q, y_qry[i])
                losses_q[k + 1] += loss_q

                with torch.no_grad():
                    pred_q = F.softmax(logits_q, dim=1).argmax(dim=1)
                    correct = torch.eq(pred_q, y_qry[i]).sum().item()
                    corrects[k + 1] = corrects[k + 1] + correct

        loss_q = losses_q[-1] / task_num

        self.meta_optim.zero_grad()
        loss_q.backward()
        self.meta_optim.step()

        accs = np.array(corrects) / (querysz * task_num)

        return accs


class Args:
    update_lr = 0.4
    meta_lr = 1e-3
    n_way = 5
    update_step = 5


torch.manual_seed(222)
np.random.seed(222)
maml = Meta(Args())


def next_batch(task_num=4, k_spt=1, k_qry=15, n_way=5):
    x_spt = torch.randn(task_num, n_way * k_spt, 64)
    y_spt = torch.arange(n_way).repeat(k_spt).expand(task_num, -1)
    x_qry = torch.randn(task_num, n_way * k_qry, 64)
    y_qry = torch.arange(n_way).repeat(k_qry).expand(task_num, -1)
    return x_spt, y_spt, x_qry, y_qry


for step in range(30):
    x_spt, y_spt, x_qry, y_qry = next_batch()
    accs = maml(x_spt, y_spt, x_qry, y_qry)
    if step % 5 == 0:
        print('step:', step, '\ttraining acc:', accs)
