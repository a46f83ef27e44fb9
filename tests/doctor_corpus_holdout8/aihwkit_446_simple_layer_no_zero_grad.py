# Source: https://github.com/IBM/aihwkit/issues/446
#   code: examples/01_simple_layer.py at e873025, the version the issue runs
# Adapted: the example kept as it is (license header and comments dropped); aihwkit is not
#   installed, so AnalogLinear is an nn.Linear that accepts rpu_config, AnalogSGD an SGD with a
#   no-op regroup_param_groups, SingleRPUConfig and ConstantStepDevice plain records and
#   cuda.is_compiled() False (the analog tile's pulsed update is a plain SGD update here);
#   cpu.
from types import SimpleNamespace

import torch
from torch import Tensor
from torch.nn.functional import mse_loss


class AnalogLinear(torch.nn.Linear):
    def __init__(self, in_features, out_features, bias=True, rpu_config=None):
        super().__init__(in_features, out_features, bias=bias)
        self.rpu_config = rpu_config


class AnalogSGD(torch.optim.SGD):
    def regroup_param_groups(self, model):
        pass


class SingleRPUConfig(SimpleNamespace):
    pass


class ConstantStepDevice(SimpleNamespace):
    pass


cuda = SimpleNamespace(is_compiled=lambda: False)
torch.manual_seed(0)

x = Tensor([[0.1, 0.2, 0.4, 0.3], [0.2, 0.1, 0.1, 0.3]])
y = Tensor([[1.0, 0.5], [0.7, 0.3]])

rpu_config = SingleRPUConfig(device=ConstantStepDevice())
model = AnalogLinear(4, 2, bias=True,
                     rpu_config=rpu_config)

if cuda.is_compiled():
    x = x.cuda()
    y = y.cuda()
    model.cuda()

opt = AnalogSGD(model.parameters(), lr=0.1)
opt.regroup_param_groups(model)

for epoch in range(100):
    pred = model(x)
    loss = mse_loss(pred, y)
    loss.backward()

    opt.step()
    print('Loss error: {:.16f}'.format(loss))
