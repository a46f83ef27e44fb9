# Source: https://github.com/pytorch/pytorch/issues/55607
# Adapted: memory_profiler's @profile decorator dropped (it is not part of torch), the
#   reporter's loop bounded to 300 calls with a print every 100, seeded.
import torch
import torch.nn as nn

def run(net, x):
    net(x)

class ConvVerify(nn.Module):

    def init(self):
        for name, m in self.named_modules():
            # print(name, m)
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode='fan_out')
                if m.bias is not None:
                    nn.init.constant_(m.bias, 0)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.running_mean, 0)
                nn.init.constant_(m.running_var, 1)
                if m.weight is not None:
                    nn.init.constant_(m.weight, 1)
                if m.bias is not None:
                    nn.init.constant_(m.bias, 0)

    def __init__(self):
        super(ConvVerify, self).__init__()

        stride = 1
        self.model = nn.Sequential(
            nn.Conv2d(288, 64, (2, 2), stride),
            nn.BatchNorm2d(64),
            nn.ReLU(),
        )
        self.init()

    def forward(self, x):
        return self.model(x)

def begin():
    conv_verify_inst = ConvVerify()
    x = torch.autograd.Variable(torch.rand(1, 288, 7, 7))
    for i in range(300):
        run(conv_verify_inst, x)
        if i % 100 == 0:
            print(i)

if __name__ == '__main__':
    torch.manual_seed(0)
    begin()
