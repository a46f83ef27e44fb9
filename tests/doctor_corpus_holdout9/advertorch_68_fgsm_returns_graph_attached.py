# Source: https://github.com/BorealisAI/advertorch/pull/68
#   code: GradientSignAttack (advertorch/attacks/one_step_gradient.py), Attack and LabelMixin
#   (advertorch/attacks/base.py) and replicate_input/clamp (advertorch/utils.py) at 6f6de54^:
#   perturb() returns xadv without detaching it (the pull request adds .detach())
# Adapted: the attacked model is a small convolutional classifier in eval mode; the caller is
#   an evaluation that generates FGSM examples for 40 batches of 32 random 1x28x28 images,
#   keeps them to report the accuracy on the adversarial set at the end, as the advertorch
#   tutorials do with adv_untargeted; cpu, seeded.
from abc import ABCMeta

import torch
import torch.nn as nn


def replicate_input(x):
    return x.detach().clone()


def clamp(input, min=None, max=None):
    return torch.clamp(input, min=min, max=max)


class Attack(object):
    __metaclass__ = ABCMeta

    def __init__(self, predict, loss_fn, clip_min, clip_max):
        self.predict = predict
        self.loss_fn = loss_fn
        self.clip_min = clip_min
        self.clip_max = clip_max

    def perturb(self, x, **kwargs):
        error = "Sub-classes must implement perturb."
        raise NotImplementedError(error)

    def __call__(self, *args, **kwargs):
        return self.perturb(*args, **kwargs)


class LabelMixin(object):
    def _get_predicted_label(self, x):
        with torch.no_grad():
            outputs = self.predict(x)
        _, y = torch.max(outputs, dim=1)
        return y

    def _verify_and_process_inputs(self, x, y):
        if self.targeted:
            assert y is not None

        if not self.targeted:
            if y is None:
                y = self._get_predicted_label(x)

        x = replicate_input(x)
        y = replicate_input(y)
        return x, y


class GradientSignAttack(Attack, LabelMixin):
    def __init__(self, predict, loss_fn=None, eps=0.3, clip_min=0., clip_max=1., targeted=False):
        super(GradientSignAttack, self).__init__(predict, loss_fn, clip_min, clip_max)

        self.eps = eps
        self.targeted = targeted
        if self.loss_fn is None:
            self.loss_fn = nn.CrossEntropyLoss(reduction="sum")

    def perturb(self, x, y=None):
        x, y = self._verify_and_process_inputs(x, y)
        xadv = x.requires_grad_()
        outputs = self.predict(xadv)

        loss = self.loss_fn(outputs, y)
        if self.targeted:
            loss = -loss
        loss.backward()
        grad_sign = xadv.grad.detach().sign()

        xadv = xadv + self.eps * grad_sign

        xadv = clamp(xadv, self.clip_min, self.clip_max)

        return xadv


FGSM = GradientSignAttack

torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                      nn.Flatten(), nn.Linear(64, 10))
model.eval()
adversary = FGSM(model, loss_fn=nn.CrossEntropyLoss(reduction="sum"), eps=0.3, clip_min=0.0, clip_max=1.0,
                 targeted=False)

test_batches = [(torch.rand(32, 1, 28, 28), torch.randint(0, 10, (32,))) for _ in range(40)]
adv_examples, labels = [], []
for cln_data, true_label in test_batches:
    adv_untargeted = adversary.perturb(cln_data, true_label)
    adv_examples.append(adv_untargeted)
    labels.append(true_label)

with torch.no_grad():
    correct = sum((model(adv).argmax(1) == y).sum().item() for adv, y in zip(adv_examples, labels))
print("accuracy under FGSM: {:.3f}".format(correct / (32 * len(test_batches))))
