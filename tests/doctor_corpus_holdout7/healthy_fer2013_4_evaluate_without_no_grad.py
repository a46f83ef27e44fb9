# Source: https://github.com/LetheSec/Fer2013-Facial-Emotion-Recognition-Pytorch/pull/4
#   code: evaluate.py (correct_count, evaluate, main) at commit 55f2f39^, before the pull
#   request wraps the three evaluate() calls in torch.no_grad() "to stop GPU memory exploding"
# Adapted: correct_count and evaluate copied without docstrings; sklearn's precision_score,
#   recall_score, f1_score (average='micro') and confusion_matrix replaced by small numpy
#   functions with the same calls; main() kept without argparse and the checkpoint: the
#   model from get_model('ResNet18') replaced by a small convolutional network over 1x40x40
#   crops with 7 classes, the FER2013 loaders by 8 train, 4 val and 4 test batches of 8
#   images with 10 random crops each (Ncrop=True, as TenCrop produces); cpu, seeded.
import warnings

import numpy as np
import torch
import torch.nn as nn

warnings.filterwarnings("ignore")


def precision_score(y_true, y_pred, average='micro'):
    return float(np.mean(np.asarray(y_true) == np.asarray(y_pred)))


recall_score = precision_score
f1_score = precision_score


def confusion_matrix(y_true, y_pred):
    n = max(max(y_true), max(y_pred)) + 1
    m = np.zeros((n, n), dtype=np.int64)
    for t, p in zip(y_true, y_pred):
        m[t, p] += 1
    return m


def correct_count(output, target, topk=(1,)):
    maxk = max(topk)

    _, pred = output.topk(maxk, 1, True, True)
    pred = pred.t()
    correct = pred.eq(target.view(1, -1).expand_as(pred))

    res = []
    for k in topk:
        correct_k = correct[:k].contiguous().view(-1).float().sum(0, keepdim=True)
        res.append(correct_k)
    return res


def evaluate(net, dataloader, loss_fn, Ncrop, device):
    net = net.eval()
    loss_tr, n_samples = 0.0, 0.0

    y_pred = []
    y_gt = []

    correct_count1 = 0
    correct_count2 = 0

    for data in dataloader:
        inputs, labels = data
        inputs, labels = inputs.to(device), labels.to(device)

        if Ncrop:
            bs, ncrops, c, h, w = inputs.shape
            inputs = inputs.view(-1, c, h, w)

            outputs = net(inputs)

            outputs = outputs.view(bs, ncrops, -1)
            outputs = torch.sum(outputs, dim=1) / ncrops
        else:
            outputs = net(inputs)

        loss = loss_fn(outputs, labels)

        loss_tr += loss.item()

        counts = correct_count(outputs, labels, topk=(1, 2))
        correct_count1 += counts[0].item()
        correct_count2 += counts[1].item()

        _, preds = torch.max(outputs.data, 1)
        n_samples += labels.size(0)

        y_pred.extend(pred.item() for pred in preds)
        y_gt.extend(y.item() for y in labels)

    acc1 = 100 * correct_count1 / n_samples
    acc2 = 100 * correct_count2 / n_samples
    loss = loss_tr / n_samples
    print("--------------------------------------------------------")
    print("Top 1 Accuracy: %2.6f %%" % acc1)
    print("Top 2 Accuracy: %2.6f %%" % acc2)
    print("Loss: %2.6f" % loss)
    print("Precision: %2.6f" % precision_score(y_gt, y_pred, average='micro'))
    print("Recall: %2.6f" % recall_score(y_gt, y_pred, average='micro'))
    print("F1 Score: %2.6f" % f1_score(y_gt, y_pred, average='micro'))
    print("Confusion Matrix:\n", confusion_matrix(y_gt, y_pred), '\n')


def get_model(arch):
    return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(64, 128, 3, padding=1), nn.BatchNorm2d(128), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 7))


def get_dataloaders(augment=False):
    def loader(n):
        return [(torch.randn(8, 10, 1, 40, 40), torch.randint(0, 7, (8,))) for _ in range(n)]
    return loader(8), loader(4), loader(4)


def main():
    torch.manual_seed(0)
    device = torch.device('cpu')

    loss_fn = nn.CrossEntropyLoss()

    model = get_model("ResNet18").to(device)

    train_loader, val_loader, test_loader = get_dataloaders(augment=False)

    print("Train")
    evaluate(model, train_loader, loss_fn, True, device)

    print("Val")
    evaluate(model, val_loader, loss_fn, True, device)

    print("Test")
    evaluate(model, test_loader, loss_fn, True, device)


if __name__ == "__main__":
    main()
