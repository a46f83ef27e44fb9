# Source: https://github.com/JIA-Lab-research/DecoupleNet/issues/3
#   code: train_phase1.py (main_worker's training loop) of dvlab-research/DecoupleNet at 7b10e91
# Adapted: the training loop kept as it was (G on source and target, the per-class confidence
#   bank and thresholds, D1 and D2, the six loss_*_value sums and their .item() at the end of
#   each iteration); one process instead of DistributedDataParallel (dist.all_reduce is a no-op
#   stand-in), torch.cuda.amp autocast dropped and GradScaler replaced by a stand-in with the same
#   scale/step/update calls (fp32 on cpu), learning-rate schedules, tensorboard, validation and
#   snapshots dropped; the ResNet backbones, head, classifiers and discriminators replaced by
#   small conv stacks; GTA5/Cityscapes by random 3x32x32 images with 5 classes and
#   conf_bank_length 2000; iter_size 2, 60 iterations; cpu, seeded.
import types

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

args = types.SimpleNamespace(num_classes=5, ignore_label=250, iter_size=2, num_steps=60,
                             learning_rate=2.5e-4, learning_rate_D=1e-4, momentum=0.9,
                             weight_decay=5e-4, lambda_adv_src=0.001, lambda_adv_tgt=0.001,
                             lambda_st=0.1, conf_p=0.5, conf_bank_length=2000, print_every=10,
                             rcrop=[32, 32])
dist = types.SimpleNamespace(all_reduce=lambda tensor: tensor)


class GradScaler:
    def scale(self, loss):
        return loss

    def step(self, optimizer):
        optimizer.step()

    def update(self):
        pass


def conv_block(cin, cout, stride=1):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride=stride, padding=1), nn.BatchNorm2d(cout), nn.ReLU())


def discriminator(cin):
    return nn.Sequential(nn.Conv2d(cin, 16, 4, 2, 1), nn.LeakyReLU(0.2), nn.Conv2d(16, 32, 4, 2, 1),
                         nn.LeakyReLU(0.2), nn.Conv2d(32, 1, 4, 2, 1))


torch.manual_seed(0)
model_B1 = conv_block(3, 16, stride=2)
model_B2 = conv_block(3, 16, stride=2)
model_B = nn.Sequential(conv_block(16, 32), conv_block(32, 32))
head = conv_block(32, 32)
classifier = nn.Conv2d(32, args.num_classes, 1)
aux_classifier = nn.Conv2d(32, args.num_classes, 1)
model_D1 = discriminator(16)
model_D2 = discriminator(args.num_classes)

model_params = [{'params': list(model_B1.parameters()) + list(model_B2.parameters()) + list(model_B.parameters())},
                {'params': list(head.parameters()) + list(classifier.parameters()) + \
                    list(aux_classifier.parameters()), 'lr': args.learning_rate * 10}]
optimizer = optim.SGD(model_params, lr=args.learning_rate, momentum=args.momentum, weight_decay=args.weight_decay)
optimizer_D1 = optim.Adam(model_D1.parameters(), lr=args.learning_rate_D, betas=(0.9, 0.99))
optimizer_D2 = optim.Adam(model_D2.parameters(), lr=args.learning_rate_D, betas=(0.9, 0.99))

bce_loss = torch.nn.BCEWithLogitsLoss()
seg_loss = torch.nn.CrossEntropyLoss(ignore_index=args.ignore_label)
interp = nn.Upsample(size=(args.rcrop[1], args.rcrop[0]), mode='bilinear', align_corners=True)
interp_target = nn.Upsample(size=(args.rcrop[1], args.rcrop[0]), mode='bilinear', align_corners=True)

source_label = 0
target_label = 1

source_train_loader = [{'img': torch.randn(2, 3, 32, 32), 'label': torch.randint(0, args.num_classes, (2, 32, 32))}
                       for _ in range(20)]
target_train_loader = [{'img': torch.randn(2, 3, 32, 32)} for _ in range(20)]
trainloader_iter = enumerate(source_train_loader)
targetloader_iter = enumerate(target_train_loader)

conf_bank = {i: [] for i in range(args.num_classes)}
thresholds = torch.zeros(args.num_classes).float()

scaler = GradScaler()
epoch_s, epoch_t = 0, 0
for i_iter in range(args.num_steps):

    for m in (model_B1, model_B2, model_B, model_D1, model_D2, head, classifier, aux_classifier):
        m.train()

    loss_seg_value = 0
    loss_adv_src_value = 0
    loss_adv_tgt_value = 0
    loss_D1_value = 0
    loss_D2_value = 0
    loss_st_value = 0

    optimizer.zero_grad()
    optimizer_D1.zero_grad()
    optimizer_D2.zero_grad()

    for sub_i in range(args.iter_size):

        # train G
        for param in model_D1.parameters():
            param.requires_grad = False
        for param in model_D2.parameters():
            param.requires_grad = False

        try:
            _, batch = trainloader_iter.__next__()
        except StopIteration:
            epoch_s += 1
            trainloader_iter = enumerate(source_train_loader)
            _, batch = trainloader_iter.__next__()

        images = batch['img']
        labels = batch['label']

        src_size = images.shape[-2:]
        feat_src = model_B1(images)

        feat_B_src = model_B(feat_src)
        pred = classifier(head(feat_B_src))
        pred = interp(pred)

        temperature = 1.8
        pred = pred.div(temperature)
        loss_seg = seg_loss(pred, labels)

        D_out = model_D1(F.interpolate(feat_src, size=src_size, mode='bilinear', align_corners=True))

        loss_adv_src = args.lambda_adv_src * bce_loss(D_out, torch.FloatTensor(D_out.data.size()).fill_(target_label))
        loss = loss_seg + loss_adv_src

        loss = loss / args.iter_size
        loss_seg_value += loss_seg / args.iter_size
        loss_adv_src_value += loss_adv_src / args.iter_size

        scaler.scale(loss).backward()

        try:
            _, batch = targetloader_iter.__next__()
        except StopIteration:
            epoch_t += 1
            targetloader_iter = enumerate(target_train_loader)
            _, batch = targetloader_iter.__next__()

        images = batch['img']

        tgt_size = images.shape[-2:]
        feat_tgt = model_B2(images)
        feat_B_tgt = model_B(feat_tgt)

        feat_B_tgt_head = head(feat_B_tgt)
        pred_tgt = classifier(feat_B_tgt_head)

        with torch.no_grad():
            pred_logits, pred_idx = F.softmax(pred_tgt.detach(), 1).max(1)
            assert pred_logits.shape[-2:] == pred_tgt.shape[-2:]

            for c in range(args.num_classes):
                prob_c = pred_logits[pred_idx == c].cpu().numpy().tolist()
                if len(prob_c) == 0:
                    continue
                conf_bank[c].extend(prob_c)
                rank = int(len(conf_bank[c]) * args.conf_p)
                thresholds[c] = sorted(conf_bank[c], reverse=True)[rank]
                if len(conf_bank[c]) > args.conf_bank_length:
                    conf_bank[c] = conf_bank[c][-args.conf_bank_length:]

            n = torch.tensor(1.0)
            dist.all_reduce(thresholds)
            dist.all_reduce(n)
            thresholds = thresholds / n

            pred_idx[pred_logits < thresholds[pred_idx]] = args.ignore_label

        pred_tgt = interp_target(pred_tgt)
        pred_tgt = pred_tgt.div(temperature)

        pred_tgt_aux = aux_classifier(feat_B_tgt_head)
        loss_st = args.lambda_st * seg_loss(pred_tgt_aux, pred_idx)

        D_out = model_D2(F.softmax(pred_tgt, 1))

        loss_adv_tgt = args.lambda_adv_tgt * bce_loss(D_out, torch.FloatTensor(D_out.data.size()).fill_(source_label))
        loss = loss_adv_tgt + loss_st

        loss = loss / args.iter_size
        loss_adv_tgt_value += loss_adv_tgt / args.iter_size
        loss_st_value += loss_st / args.iter_size

        scaler.scale(loss).backward()

        # train D
        for param in model_D1.parameters():
            param.requires_grad = True

        optimizer_D1.zero_grad()
        src_D1_pred = model_D1(F.interpolate(feat_src.detach(), size=src_size, mode='bilinear', align_corners=True))
        loss_D1_src = 0.5 * bce_loss(src_D1_pred, torch.FloatTensor(src_D1_pred.data.size()).fill_(source_label)) / args.iter_size

        scaler.scale(loss_D1_src).backward()

        tgt_D1_pred = model_D1(F.interpolate(feat_tgt.detach(), size=tgt_size, mode='bilinear', align_corners=True))
        loss_D1_tgt = 0.5 * bce_loss(tgt_D1_pred, torch.FloatTensor(tgt_D1_pred.data.size()).fill_(target_label)) / args.iter_size

        loss_D1_value += loss_D1_src + loss_D1_tgt

        scaler.scale(loss_D1_tgt).backward()

        for param in model_D2.parameters():
            param.requires_grad = True
        optimizer_D2.zero_grad()

        src_D2_pred = model_D2(F.softmax(pred.detach(), 1))
        loss_D2_src = 0.5 * bce_loss(src_D2_pred, torch.FloatTensor(src_D2_pred.data.size()).fill_(source_label)) / args.iter_size

        scaler.scale(loss_D2_src).backward()

        tgt_D2_pred = model_D2(F.softmax(pred_tgt.detach(), 1))
        loss_D2_tgt = 0.5 * bce_loss(tgt_D2_pred, torch.FloatTensor(tgt_D2_pred.data.size()).fill_(target_label)) / args.iter_size

        loss_D2_value += loss_D2_src + loss_D2_tgt

        scaler.scale(loss_D2_tgt).backward()

    n = torch.tensor(1.0)

    dist.all_reduce(n), dist.all_reduce(loss_seg_value), dist.all_reduce(loss_adv_src_value), dist.all_reduce(loss_adv_tgt_value)
    dist.all_reduce(loss_D1_value), dist.all_reduce(loss_D2_value), dist.all_reduce(loss_st_value)

    loss_seg_value = loss_seg_value.item() / n.item()
    loss_adv_src_value = loss_adv_src_value.item() / n.item()
    loss_adv_tgt_value = loss_adv_tgt_value.item() / n.item()
    loss_D1_value = loss_D1_value.item() / n.item()
    loss_D2_value = loss_D2_value.item() / n.item()
    loss_st_value = loss_st_value.item() / n.item()

    scaler.step(optimizer)
    scaler.step(optimizer_D1)
    scaler.step(optimizer_D2)
    scaler.update()

    if i_iter % args.print_every == 0:
        print('iter = {0:8d}/{1:8d}, loss_seg = {2:.3f}, loss_adv_src = {3:.5f}, loss_adv_tgt = {4:.5f}, loss_D1 = {5:.3f}, '
              'loss_D2 = {6:.3f}, loss_st = {7:.5f}, epoch_s = {8:3d}, epoch_t = {9:3d}'.format(i_iter, args.num_steps, loss_seg_value, loss_adv_src_value, \
              loss_adv_tgt_value, loss_D1_value, loss_D2_value, loss_st_value, epoch_s, epoch_t))
