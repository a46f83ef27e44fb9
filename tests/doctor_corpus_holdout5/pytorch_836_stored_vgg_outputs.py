# Source: https://github.com/pytorch/pytorch/issues/836
# Adapted: the reporter's code ("a very simple code that just stocks VGG outputs") is on a
#   pastebin page that is not stored; the maintainer's answer quotes it back with `.data`
#   added to the stored output, so the script is that loop without `.data`: VGG-19 outputs of
#   random images appended to a list; torchvision (not installed) is replaced by
#   models.vgg19, a stub with the same call returning a small VGG-style network (conv-relu
#   blocks with max pooling and a classifier) from random weights; 64x64 images instead of
#   224x224, 40 images instead of 10; seeded.
import types

import torch
import torch.nn as nn
from torch.autograd import Variable


# ---- stub for torchvision.models (not installed; same call) ----
def _vgg19(pretrained=False):
    layers, c = [], 3
    for width in (32, 64, 128, 128):
        layers += [nn.Conv2d(c, width, 3, padding=1), nn.ReLU(inplace=True),
                   nn.Conv2d(width, width, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2)]
        c = width
    return nn.Sequential(*layers, nn.Flatten(), nn.Linear(128 * 4 * 4, 512), nn.ReLU(inplace=True),
                         nn.Linear(512, 1000))


models = types.SimpleNamespace(vgg19=_vgg19)
# ---- end of stub ----

torch.manual_seed(0)
vgg19 = models.vgg19(pretrained=True)

l = []
for i in range(40):
    l.append(vgg19(Variable(torch.randn([1,3,64,64]))))
print(len(l))
