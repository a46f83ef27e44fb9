# Source: https://github.com/amirgholami/PyHessian/issues/25
#   code: pyhessian/hessian.py (class hessian: __init__ and eigenvalues for a single batch)
#   and pyhessian/utils.py at de8cf23
# Adapted: hessian's __init__ and eigenvalues and the utils they use kept as they are
#   (docstrings and the dataloader path dropped); the call
#   hessian(model, nn.BCELoss(), data=(X_train, y_train)).eigenvalues(top_n=1) run after
#   each epoch of a small training loop of a binary classifier (an MLP on 20 random
#   features, 10 batches of 64 per epoch, 8 epochs, Adam), with cuda=False and maxIter=20;
#   cpu, seeded.
import torch
import torch.nn as nn


def group_product(xs, ys):
    return sum([torch.sum(x * y) for (x, y) in zip(xs, ys)])


def group_add(params, update, alpha=1):
    for i, p in enumerate(params):
        params[i].data.add_(update[i] * alpha)
    return params


def normalization(v):
    s = group_product(v, v)
    s = s**0.5
    s = s.cpu().item()
    v = [vi / (s + 1e-6) for vi in v]
    return v


def get_params_grad(model):
    params = []
    grads = []
    for param in model.parameters():
        if not param.requires_grad:
            continue
        params.append(param)
        grads.append(0. if param.grad is None else param.grad + 0.)
    return params, grads


def hessian_vector_product(gradsH, params, v):
    hv = torch.autograd.grad(gradsH,
                             params,
                             grad_outputs=v,
                             only_inputs=True,
                             retain_graph=True)
    return hv


def orthnormal(w, v_list):
    for v in v_list:
        w = group_add(w, v, alpha=-group_product(w, v))
    return normalization(w)


class hessian():
    def __init__(self, model, criterion, data=None, dataloader=None, cuda=True):
        assert (data != None and dataloader == None) or (data == None and
                                                         dataloader != None)

        self.model = model.eval()
        self.criterion = criterion

        if data != None:
            self.data = data
            self.full_dataset = False
        else:
            self.data = dataloader
            self.full_dataset = True

        if cuda:
            self.device = 'cuda'
        else:
            self.device = 'cpu'

        if not self.full_dataset:
            self.inputs, self.targets = self.data
            if self.device == 'cuda':
                self.inputs, self.targets = self.inputs.cuda(
                ), self.targets.cuda()

            outputs = self.model(self.inputs)
            loss = self.criterion(outputs, self.targets)
            loss.backward(create_graph=True)

        params, gradsH = get_params_grad(self.model)
        self.params = params
        self.gradsH = gradsH

    def eigenvalues(self, maxIter=100, tol=1e-3, top_n=1):
        assert top_n >= 1

        device = self.device

        eigenvalues = []
        eigenvectors = []

        computed_dim = 0

        while computed_dim < top_n:
            eigenvalue = None
            v = [torch.randn(p.size()).to(device) for p in self.params
                ]
            v = normalization(v)

            for i in range(maxIter):
                v = orthnormal(v, eigenvectors)
                self.model.zero_grad()

                Hv = hessian_vector_product(self.gradsH, self.params, v)
                tmp_eigenvalue = group_product(Hv, v).cpu().item()

                v = normalization(Hv)

                if eigenvalue == None:
                    eigenvalue = tmp_eigenvalue
                else:
                    if abs(eigenvalue - tmp_eigenvalue) / (abs(eigenvalue) +
                                                           1e-6) < tol:
                        break
                    else:
                        eigenvalue = tmp_eigenvalue
            eigenvalues.append(eigenvalue)
            eigenvectors.append(v)
            computed_dim += 1

        return eigenvalues, eigenvectors


torch.manual_seed(0)
X_train = torch.randn(640, 20)
y_train = (X_train[:, :1] + 0.5 * X_train[:, 1:2] > 0).float()
model = nn.Sequential(nn.Linear(20, 64), nn.Tanh(), nn.Linear(64, 1), nn.Sigmoid())
criterion = nn.BCELoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
for epoch in range(8):
    model.train()
    for b in range(10):
        optimizer.zero_grad()
        loss = criterion(model(X_train[64 * b:64 * b + 64]), y_train[64 * b:64 * b + 64])
        loss.backward()
        optimizer.step()
    hessian_comp = hessian(model, nn.BCELoss(), data=(X_train, y_train), cuda=False)
    top_eigenvalues, top_eigenvector = hessian_comp.eigenvalues(maxIter=20, top_n=1)
    print(epoch, loss.item(), top_eigenvalues)
