# Source: https://github.com/alexis-jacq/Pytorch-Tutorials/issues/6
#   code: the optimisation loop (closure calling each StyleLoss/ContentLoss backward
#   and summing the returned losses) with ContentLoss, GramMatrix, StyleLoss and
#   get_style_model_and_losses of Neural_Style.ipynb, whose backward() runs
#   self.loss.backward(retain_graph=True)
# Adapted: VGG-19 replaced by five small convolution/ReLU/pool blocks with the same layer
#   naming; the content and style images by random 1x3x32x32 tensors; the closure runs
#   kept at 300 (LBFGS with its default 20 evaluations per step); `.data[0]` on the 0-dim
#   scores (the TypeError the issue reports on PyTorch 0.4) written as `.item()`; the input
#   image is a Parameter as the notebook's LBFGS expects; plotting dropped; cpu, seeded.
import copy

import torch
import torch.nn as nn
import torch.optim as optim


class ContentLoss(nn.Module):

    def __init__(self, target, weight):
        super(ContentLoss, self).__init__()
        self.target = target.detach() * weight
        self.weight = weight
        self.criterion = nn.MSELoss()

    def forward(self, input):
        self.loss = self.criterion(input * self.weight, self.target)
        self.output = input
        return self.output

    def backward(self, retain_graph=True):
        self.loss.backward(retain_graph=retain_graph)
        return self.loss


class GramMatrix(nn.Module):

    def forward(self, input):
        a, b, c, d = input.size()
        features = input.view(a * b, c * d)
        G = torch.mm(features, features.t())
        return G.div(a * b * c * d)


class StyleLoss(nn.Module):

    def __init__(self, target, weight):
        super(StyleLoss, self).__init__()
        self.target = target.detach() * weight
        self.weight = weight
        self.gram = GramMatrix()
        self.criterion = nn.MSELoss()

    def forward(self, input):
        self.output = input.clone()
        self.G = self.gram(input)
        self.G.mul_(self.weight)
        self.loss = self.criterion(self.G, self.target)
        return self.output

    def backward(self, retain_graph=True):
        self.loss.backward(retain_graph=retain_graph)
        return self.loss


content_layers = ['conv_4']
style_layers = ['conv_1', 'conv_2', 'conv_3', 'conv_4', 'conv_5']


def get_style_model_and_losses(cnn, style_img, content_img, style_weight=1000, content_weight=1):
    cnn = copy.deepcopy(cnn)
    content_losses = []
    style_losses = []
    model = nn.Sequential()
    gram = GramMatrix()

    i = 1
    for layer in list(cnn):
        if isinstance(layer, nn.Conv2d):
            name = "conv_" + str(i)
            model.add_module(name, layer)
            if name in content_layers:
                target = model(content_img).clone()
                content_loss = ContentLoss(target, content_weight)
                model.add_module("content_loss_" + str(i), content_loss)
                content_losses.append(content_loss)
            if name in style_layers:
                target_feature = model(style_img).clone()
                target_feature_gram = gram(target_feature)
                style_loss = StyleLoss(target_feature_gram, style_weight)
                model.add_module("style_loss_" + str(i), style_loss)
                style_losses.append(style_loss)
        if isinstance(layer, nn.ReLU):
            name = "relu_" + str(i)
            model.add_module(name, layer)
            i += 1
        if isinstance(layer, nn.MaxPool2d):
            name = "pool_" + str(i)
            model.add_module(name, layer)
    return model, style_losses, content_losses


torch.manual_seed(0)
cnn = nn.Sequential()
channels = [3, 16, 32, 32, 64, 64]
for k in range(5):
    cnn.append(nn.Conv2d(channels[k], channels[k + 1], 3, padding=1))
    cnn.append(nn.ReLU())
    if k in (1, 3):
        cnn.append(nn.MaxPool2d(2))
for p in cnn.parameters():
    p.requires_grad_(False)
style_img = torch.rand(1, 3, 32, 32)
content_img = torch.rand(1, 3, 32, 32)

model, style_losses, content_losses = get_style_model_and_losses(cnn, style_img, content_img)
input = nn.Parameter(torch.randn(content_img.size()))
optimizer = optim.LBFGS([input])

run = [0]
while run[0] <= 300:

    def closure():
        optimizer.zero_grad()
        model.forward(input)
        style_score = 0
        content_score = 0

        for sl in style_losses:
            style_score += sl.backward()
        for cl in content_losses:
            content_score += cl.backward()

        run[0] += 1
        if run[0] % 10 == 0:
            print("run " + str(run) + ":")
            print(style_score.item())
            print(content_score.item())

        return content_score + style_score

    optimizer.step(closure)
