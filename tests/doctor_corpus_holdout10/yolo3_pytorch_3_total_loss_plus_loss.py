# Source: https://github.com/bubbliiiing/yolo3-pytorch/issues/3
#   code: train.py (fit_ont_epoch and the first training phase of __main__) at commit
#   1e2f35f, the version the issue was filed against
# Adapted: fit_ont_epoch kept as it is, with .cuda() and the checkpoint torch.save at the end
#   of each epoch dropped; YoloBody -> a small three-scale detector (a conv backbone with three
#   1x1 heads of 3*(5+20) channels at strides 8, 16 and 32 of a 64x64 input); YOLOLoss -> a
#   loss with the same call (outputs, targets) -> (loss, ...) (squared error of the
#   objectness maps against random targets, cross-entropy of the class scores); the VOC
#   Generator -> a generator of random numpy images and box arrays; 40 training and 4
#   validation batches of 4 per epoch, 2 epochs, the second training phase dropped; cpu, seeded.
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.autograd import Variable


class YoloBody(nn.Module):
    def __init__(self, num_classes=20):
        super(YoloBody, self).__init__()
        out = 3 * (5 + num_classes)
        self.s8 = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.LeakyReLU(0.1), nn.Conv2d(16, 32, 3, 2, 1),
                                nn.LeakyReLU(0.1), nn.Conv2d(32, 32, 3, 2, 1), nn.LeakyReLU(0.1))
        self.s16 = nn.Sequential(nn.Conv2d(32, 64, 3, 2, 1), nn.LeakyReLU(0.1))
        self.s32 = nn.Sequential(nn.Conv2d(64, 64, 3, 2, 1), nn.LeakyReLU(0.1))
        self.head0 = nn.Conv2d(64, out, 1)
        self.head1 = nn.Conv2d(64, out, 1)
        self.head2 = nn.Conv2d(32, out, 1)

    def forward(self, x):
        x2 = self.s8(x)
        x1 = self.s16(x2)
        x0 = self.s32(x1)
        return self.head0(x0), self.head1(x1), self.head2(x2)


class YOLOLoss(nn.Module):
    def __init__(self, anchors, num_classes, img_size):
        super(YOLOLoss, self).__init__()
        self.num_anchors = len(anchors)
        self.num_classes = num_classes
        self.img_size = img_size

    def forward(self, input, targets=None):
        bs, _, h, w = input.shape
        pred = input.view(bs, self.num_anchors, 5 + self.num_classes, h, w)
        conf = torch.sigmoid(pred[:, :, 4])
        mask = torch.zeros_like(conf)
        for b, ann in enumerate(targets):
            for box in ann:
                gx, gy = int(box[0] * w) % w, int(box[1] * h) % h
                mask[b, :, gy, gx] = 1
        loss_conf = F.mse_loss(conf, mask, reduction='sum')
        cls = pred[:, :, 5:].permute(0, 1, 3, 4, 2).reshape(-1, self.num_classes)
        label = torch.zeros(cls.shape[0], dtype=torch.long)
        loss_cls = F.cross_entropy(cls, label)
        loss = loss_conf + loss_cls
        return loss, loss_conf.item(), loss_cls.item()


def Generator(batch_size, steps, seed):
    rng = np.random.RandomState(seed)
    while True:
        for _ in range(steps):
            images = rng.rand(batch_size, 3, 64, 64).astype(np.float32)
            targets = [rng.rand(3, 5).astype(np.float32) for _ in range(batch_size)]
            yield images, targets


def fit_ont_epoch(net,yolo_losses,epoch,epoch_size,epoch_size_val,gen,genval,Epoch):
    total_loss = 0
    val_loss = 0
    for iteration in range(epoch_size):
        start_time = time.time()
        images, targets = next(gen)
        with torch.no_grad():
            images = Variable(torch.from_numpy(images).type(torch.FloatTensor))
            targets = [Variable(torch.from_numpy(ann).type(torch.FloatTensor)) for ann in targets]

        optimizer.zero_grad()
        outputs = net(images)
        losses = []
        for i in range(3):
            loss_item = yolo_losses[i](outputs[i], targets)
            losses.append(loss_item[0])
        loss = sum(losses)
        loss.backward()
        optimizer.step()

        total_loss += loss
        waste_time = time.time() - start_time
        print('\nEpoch:'+ str(epoch+1) + '/' + str(Epoch))
        print('iter:' + str(iteration) + '/' + str(epoch_size) + ' || Total Loss: %.4f || %.4fs/step' % (total_loss/(iteration+1),waste_time))

    print('Start Validation')
    for iteration in range(epoch_size_val):
        images_val, targets_val = next(gen_val)

        with torch.no_grad():
            images_val = Variable(torch.from_numpy(images_val).type(torch.FloatTensor))
            targets_val = [Variable(torch.from_numpy(ann).type(torch.FloatTensor)) for ann in targets_val]
            optimizer.zero_grad()
            outputs = net(images_val)
            losses = []
            for i in range(3):
                loss_item = yolo_losses[i](outputs[i], targets_val)
                losses.append(loss_item[0])
            loss = sum(losses)
            val_loss += loss
    print('Finish Validation')
    print('\nEpoch:'+ str(epoch+1) + '/' + str(Epoch))
    print('Total Loss: %.4f || Val Loss: %.4f ' % (total_loss/(epoch_size+1),val_loss/(epoch_size_val+1)))


if __name__ == "__main__":
    torch.manual_seed(0)
    model = YoloBody(20)
    net = model

    yolo_losses = []
    anchors = np.reshape([10,13, 16,30, 33,23, 30,61, 62,45, 59,119, 116,90, 156,198, 373,326],[-1,2])
    for i in range(3):
        yolo_losses.append(YOLOLoss(anchors[[6,7,8],:] if i == 0 else anchors[[3,4,5],:] if i == 1 else anchors[[0,1,2],:],
                                    20, (64, 64)))

    if True:
        lr = 1e-4
        Batch_size = 4
        Init_Epoch = 0
        Freeze_Epoch = 2

        optimizer = optim.Adam(net.parameters(),lr)
        lr_scheduler = optim.lr_scheduler.StepLR(optimizer,step_size=1,gamma=0.95)

        gen = Generator(Batch_size, 40, 0)
        gen_val = Generator(Batch_size, 4, 1)

        epoch_size = 40
        epoch_size_val = 4

        for epoch in range(Init_Epoch,Freeze_Epoch):
            fit_ont_epoch(net,yolo_losses,epoch,epoch_size,epoch_size_val,gen,gen_val,Freeze_Epoch)
            lr_scheduler.step()
