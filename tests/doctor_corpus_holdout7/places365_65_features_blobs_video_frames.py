# Source: https://github.com/CSAILVision/places365/issues/65
#   code: run_placesCNN_unified.py and wideresnet.py at commit 0725d60 (the demo the reporter
#   ran in a loop over video frames)
# Adapted: wideresnet.resnet18 copied (BasicBlock/ResNet without the pretrained URLs), randomly
#   initialised instead of loading wideresnet18_places365.pth.tar; load_labels() returns
#   generated category, indoor/outdoor and attribute labels and a random W_attribute instead
#   of downloading the files; torchvision's transforms replaced by a stub with the same
#   Compose/Resize/ToTensor/Normalize interface (F.interpolate), PIL's Image.open by random
#   RGB frames; the reporter's loop over folders/clips/frames kept (the part after the
#   forward pass, which the stored report cuts off, written from the demo: scene categories,
#   indoor/outdoor vote and attributes stored per frame in a dictionary); 2 shows x 3 clips
#   x 8 frames; cpu.
import os
import numpy as np
import torch
import torch.nn as nn
from torch.autograd import Variable as V
from torch.nn import functional as F


def conv3x3(in_planes, out_planes, stride=1):
    "3x3 convolution with padding"
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride,
                     padding=1, bias=False)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super(BasicBlock, self).__init__()
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        residual = x

        out = self.conv1(x)
        out = self.bn1(out)
        out = self.relu(out)

        out = self.conv2(out)
        out = self.bn2(out)

        if self.downsample is not None:
            residual = self.downsample(x)

        out += residual
        out = self.relu(out)

        return out


class ResNet(nn.Module):

    def __init__(self, block, layers, num_classes=1000):
        self.inplanes = 64
        super(ResNet, self).__init__()
        self.conv1 = nn.Conv2d(3, 64, kernel_size=7, stride=2, padding=3,
                               bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.layer1 = self._make_layer(block, 64, layers[0])
        self.layer2 = self._make_layer(block, 128, layers[1], stride=2)
        self.layer3 = self._make_layer(block, 256, layers[2], stride=2)
        self.layer4 = self._make_layer(block, 512, layers[3], stride=2)
        self.avgpool = nn.AvgPool2d(14)
        self.fc = nn.Linear(512 * block.expansion, num_classes)

    def _make_layer(self, block, planes, blocks, stride=1):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(
                nn.Conv2d(self.inplanes, planes * block.expansion,
                          kernel_size=1, stride=stride, bias=False),
                nn.BatchNorm2d(planes * block.expansion),
            )

        layers = []
        layers.append(block(self.inplanes, planes, stride, downsample))
        self.inplanes = planes * block.expansion
        for i in range(1, blocks):
            layers.append(block(self.inplanes, planes))

        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.conv1(x)
        x = self.bn1(x)
        x = self.relu(x)

        x = self.layer1(x)
        x = self.layer2(x)
        x = self.layer3(x)
        x = self.layer4(x)

        x = self.avgpool(x)
        x = x.view(x.size(0), -1)
        x = self.fc(x)

        return x


class wideresnet:
    @staticmethod
    def resnet18(**kwargs):
        return ResNet(BasicBlock, [2, 2, 2, 2], **kwargs)


class trn:
    class Compose:
        def __init__(self, transforms):
            self.transforms = transforms

        def __call__(self, img):
            for t in self.transforms:
                img = t(img)
            return img

    class Resize:
        def __init__(self, size):
            self.size = size

        def __call__(self, img):
            return img.resize(self.size)

    class ToTensor:
        def __call__(self, img):
            return torch.from_numpy(img.pixels.transpose(2, 0, 1).copy()).float() / 255

    class Normalize:
        def __init__(self, mean, std):
            self.mean = torch.tensor(mean)[:, None, None]
            self.std = torch.tensor(std)[:, None, None]

        def __call__(self, tensor):
            return (tensor - self.mean) / self.std


class _Frame:
    def __init__(self, pixels):
        self.pixels = pixels

    def resize(self, size):
        t = torch.from_numpy(self.pixels.transpose(2, 0, 1).copy()).float()[None]
        t = F.interpolate(t, size=size, mode='bilinear', align_corners=False)
        return _Frame(t[0].permute(1, 2, 0).round().clamp(0, 255).byte().numpy())


class Image:
    @staticmethod
    def open(path):
        rng = np.random.RandomState(abs(hash(path)) % (2 ** 31))
        return _Frame(rng.randint(0, 256, (180, 320, 3), dtype=np.uint8))


def load_labels():
    classes = tuple('category_%d' % i for i in range(365))
    labels_IO = np.random.RandomState(1).randint(0, 2, 365)
    labels_attribute = ['attribute_%d' % i for i in range(102)]
    W_attribute = np.random.RandomState(2).randn(102, 512).astype(np.float32)
    return classes, labels_IO, labels_attribute, W_attribute


def hook_feature(module, input, output):
    features_blobs.append(np.squeeze(output.data.cpu().numpy()))


def returnTF():
    tf = trn.Compose([
        trn.Resize((224, 224)),
        trn.ToTensor(),
        trn.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
    ])
    return tf


def load_model():
    model = wideresnet.resnet18(num_classes=365)
    model.eval()
    features_names = ['layer4', 'avgpool']
    for name in features_names:
        model._modules.get(name).register_forward_hook(hook_feature)
    return model


torch.manual_seed(0)
classes, labels_IO, labels_attribute, W_attribute = load_labels()

features_blobs = []
model = load_model()

tf = returnTF()

params = list(model.parameters())
weight_softmax = params[-2].data.numpy()
weight_softmax[weight_softmax < 0] = 0

root = 'path/to/video/folders'
folders = ['show_%d' % s for s in range(2)]
vcpt_dic = {}

for show in folders:
    clips = ['%s_clip_%d' % (show, c) for c in range(3)]
    for clip in clips:
        clip_path = os.path.join(os.path.join(root, show, clip))
        frames = sorted('%05d.jpg' % f for f in range(8))
        id = 0
        for frame in frames:
            cur_scpt = ''
            img = Image.open(os.path.join(clip_path, frame))
            input_img = tf(img).unsqueeze(0)
            if input_img.size(1) < 3:
                b, ch, h, w = input_img.size()
                input_img = input_img.expand(b, 3, h, w)
            input_img = V(input_img)

            logit = model.forward(input_img)
            h_x = F.softmax(logit, 1).data.squeeze()
            probs, idx = h_x.sort(0, True)
            probs = probs.numpy()
            idx = idx.numpy()

            io_image = np.mean(labels_IO[idx[:10]])
            if io_image < 0.5:
                cur_scpt += 'indoor '
            else:
                cur_scpt += 'outdoor '
            for i in range(0, 5):
                cur_scpt += classes[idx[i]] + ' '

            responses_attribute = W_attribute.dot(features_blobs[1])
            idx_a = np.argsort(responses_attribute)
            cur_scpt += ' '.join([labels_attribute[idx_a[i]] for i in range(-1, -10, -1)])

            vcpt_dic[(clip, id)] = cur_scpt
            id += 1
    print(show, len(vcpt_dic))
