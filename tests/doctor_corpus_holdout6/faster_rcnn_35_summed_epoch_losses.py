# Source: https://github.com/bubbliiiing/faster-rcnn-pytorch/issues/35
# Adapted: train.py's fit_ont_epoch and trainer.py's FasterRCNNTrainer.train_step as of commit
#   977d740 (the version the issue quotes); the Faster R-CNN itself (ResNet50 extractor, RPN,
#   anchor/proposal target creators, RoI head) is replaced by a small convolutional extractor
#   with two RPN heads and a RoI head whose four losses keep the LossTuple interface;
#   VOC images -> random 3x64x64 images with one box and label each, batch size 2, 40
#   iterations, 1 epoch, 4 validation batches, cpu, seeded; the checkpoint is not saved.
import time
from collections import namedtuple

import numpy as np
import torch
import torch.optim as optim
from torch import nn
from torch.autograd import Variable
from torch.nn import functional as F
from tqdm import tqdm

torch.manual_seed(0)
np.random.seed(0)

LossTuple = namedtuple('LossTuple',
                       ['rpn_loc_loss',
                        'rpn_cls_loss',
                        'roi_loc_loss',
                        'roi_cls_loss',
                        'total_loss'
                        ])


class FasterRCNN(nn.Module):
    def __init__(self, num_classes):
        super(FasterRCNN, self).__init__()
        self.extractor = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(),
                                       nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU())
        self.rpn_loc = nn.Conv2d(64, 9 * 4, 1)
        self.rpn_score = nn.Conv2d(64, 9 * 2, 1)
        self.head = nn.Linear(64, (num_classes + 1) * 5)
        self.num_classes = num_classes

    def freeze_bn(self):
        pass


class FasterRCNNTrainer(nn.Module):
    def __init__(self, faster_rcnn, optimizer):
        super(FasterRCNNTrainer, self).__init__()
        self.faster_rcnn = faster_rcnn
        self.optimizer = optimizer

    def forward(self, imgs, bboxes, labels, scale):
        n = imgs.shape[0]
        base_feature = self.faster_rcnn.extractor(imgs)
        rpn_locs = self.faster_rcnn.rpn_loc(base_feature)
        rpn_scores = self.faster_rcnn.rpn_score(base_feature)
        rpn_loc_loss_all, rpn_cls_loss_all, roi_loc_loss_all, roi_cls_loss_all = 0, 0, 0, 0
        for i in range(n):
            bbox = bboxes[i]
            label = labels[i]
            rpn_loc = rpn_locs[i].permute(1, 2, 0).reshape(-1, 4)
            rpn_score = rpn_scores[i].permute(1, 2, 0).reshape(-1, 2)
            gt_rpn_loc = bbox[0].expand_as(rpn_loc) / 64.
            gt_rpn_label = (torch.rand(rpn_score.shape[0]) > 0.5).long()
            rpn_loc_loss = F.smooth_l1_loss(rpn_loc, gt_rpn_loc)
            rpn_cls_loss = F.cross_entropy(rpn_score, gt_rpn_label)
            pooled = base_feature[i].mean((1, 2))
            out = self.faster_rcnn.head(pooled).view(-1, 5)
            roi_loc, roi_score = out[:, :4], out[:, 4]
            roi_loc_loss = F.smooth_l1_loss(roi_loc[label.long()], bbox / 64.)
            roi_cls_loss = F.cross_entropy(roi_score[None], label.long())
            rpn_loc_loss_all += rpn_loc_loss
            rpn_cls_loss_all += rpn_cls_loss
            roi_loc_loss_all += roi_loc_loss
            roi_cls_loss_all += roi_cls_loss
        losses = [rpn_loc_loss_all/n, rpn_cls_loss_all/n, roi_loc_loss_all/n, roi_cls_loss_all/n]
        losses = losses + [sum(losses)]
        return LossTuple(*losses)

    def train_step(self, imgs, bboxes, labels, scale):
        self.optimizer.zero_grad()
        losses = self.forward(imgs, bboxes, labels, scale)
        losses.total_loss.backward()
        self.optimizer.step()
        return losses


def Generator(batches):
    for _ in range(batches):
        imgs = np.random.rand(2, 3, 64, 64).astype(np.float32)
        boxes = [np.random.uniform(0, 64, (1, 4)).astype(np.float32) for _ in range(2)]
        labels = [np.random.randint(0, 20, (1,)).astype(np.float32) for _ in range(2)]
        yield imgs, boxes, labels


def get_lr(optimizer):
    for param_group in optimizer.param_groups:
        return param_group['lr']

def fit_ont_epoch(net,epoch,epoch_size,epoch_size_val,gen,genval,Epoch,cuda):
    total_loss = 0
    rpn_loc_loss = 0
    rpn_cls_loss = 0
    roi_loc_loss = 0
    roi_cls_loss = 0
    val_toal_loss = 0
    with tqdm(total=epoch_size,desc=f'Epoch {epoch + 1}/{Epoch}',postfix=dict,mininterval=0.3) as pbar:
        for iteration, batch in enumerate(gen):
            if iteration >= epoch_size:
                break
            imgs,boxes,labels = batch[0], batch[1], batch[2]

            with torch.no_grad():
                if cuda:
                    imgs = Variable(torch.from_numpy(imgs).type(torch.FloatTensor)).cuda()
                    boxes = [Variable(torch.from_numpy(box).type(torch.FloatTensor)).cuda() for box in boxes]
                    labels = [Variable(torch.from_numpy(label).type(torch.FloatTensor)).cuda() for label in labels]
                else:
                    imgs = Variable(torch.from_numpy(imgs).type(torch.FloatTensor))
                    boxes = [Variable(torch.from_numpy(box).type(torch.FloatTensor)) for box in boxes]
                    labels = [Variable(torch.from_numpy(label).type(torch.FloatTensor)) for label in labels]
            losses = train_util.train_step(imgs, boxes, labels, 1)
            rpn_loc, rpn_cls, roi_loc, roi_cls, total = losses
            total_loss += total
            rpn_loc_loss += rpn_loc
            rpn_cls_loss += rpn_cls
            roi_loc_loss += roi_loc
            roi_cls_loss += roi_cls

            pbar.set_postfix(**{'total'    : total_loss.item() / (iteration + 1),
                                'rpn_loc'  : rpn_loc_loss.item() / (iteration + 1),
                                'rpn_cls'  : rpn_cls_loss.item() / (iteration + 1),
                                'roi_loc'  : roi_loc_loss.item() / (iteration + 1),
                                'roi_cls'  : roi_cls_loss.item() / (iteration + 1),
                                'lr'       : get_lr(optimizer)})
            pbar.update(1)

    print('Start Validation')
    with tqdm(total=epoch_size_val, desc=f'Epoch {epoch + 1}/{Epoch}',postfix=dict,mininterval=0.3) as pbar:
        for iteration, batch in enumerate(genval):
            if iteration >= epoch_size_val:
                break
            imgs,boxes,labels = batch[0], batch[1], batch[2]
            with torch.no_grad():
                imgs = Variable(torch.from_numpy(imgs).type(torch.FloatTensor))
                boxes = [Variable(torch.from_numpy(box).type(torch.FloatTensor)) for box in boxes]
                labels = [Variable(torch.from_numpy(label).type(torch.FloatTensor)) for label in labels]

                train_util.optimizer.zero_grad()
                losses = train_util.forward(imgs, boxes, labels, 1)
                _,_,_,_, val_total = losses
                val_toal_loss += val_total
            pbar.set_postfix(**{'total_loss': val_toal_loss.item() / (iteration + 1)})
            pbar.update(1)

    print('Finish Validation')
    print('Epoch:'+ str(epoch+1) + '/' + str(Epoch))
    print('Total Loss: %.4f || Val Loss: %.4f ' % (total_loss/(epoch_size+1),val_toal_loss/(epoch_size_val+1)))


if __name__ == "__main__":
    NUM_CLASSES = 20
    Cuda = False
    model = FasterRCNN(NUM_CLASSES)
    net = model.train()

    lr = 1e-4
    Init_Epoch = 0
    Freeze_Epoch = 1
    optimizer = optim.Adam(net.parameters(),lr,weight_decay=5e-4)
    lr_scheduler = optim.lr_scheduler.StepLR(optimizer,step_size=1,gamma=0.95)

    epoch_size = 40
    epoch_size_val = 4
    gen = Generator(epoch_size)
    gen_val = Generator(epoch_size_val)
    model.freeze_bn()

    train_util = FasterRCNNTrainer(model,optimizer)

    for epoch in range(Init_Epoch,Freeze_Epoch):
        fit_ont_epoch(net,epoch,epoch_size,epoch_size_val,gen,gen_val,Freeze_Epoch,Cuda)
        lr_scheduler.step()
