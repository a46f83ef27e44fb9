# Source: https://github.com/pytorch/pytorch/issues/1346
# Adapted: the posted loop kept as it was, with three changes for today's API: `.cuda()`
#   dropped (cpu), Python 2 `print i` -> print(), and `retain_variables=True` -> `retain_graph=True,
#   create_graph=True` (retain_variables is the old name of retain_graph; on the autograd
#   branch of the report, backward with a grad_output that requires grad recorded the
#   gradient's history, which create_graph=True does today); `Variable(...)` kept (it returns
#   the tensor); `while True` -> 3000 iterations, printing every 500; seeded.
from __future__ import print_function

import torch
from torch.autograd import Variable
import torch.nn as nn


torch.manual_seed(0)
i = 0
while i < 3000:
    if i % 500 == 0:
        print(i)
    i += 1
    x = Variable(torch.randn(2, 2), requires_grad=True)
    y = Variable(torch.randn(2, 2), requires_grad=True)

    z = x ** 2 + y * x + y ** 2
    z.backward(Variable(torch.ones(2, 2), requires_grad=True), retain_graph=True, create_graph=True)

    x_grad = 2 * x.data + y.data
    y_grad = x.data + 2 * y.data

    grad_sum = 2 * x.grad + y.grad
    grad_sum = grad_sum[:, :-1]
    grad_sum.backward(torch.ones(2, 1))
