# Source: https://github.com/ahmetgunduz/Real-time-GesRec/pull/88
#   code: test.py (calculate_video_results, test) and utils.py (AverageMeter) at 52f5a66^,
#   before the pull request moved the forward pass under torch.no_grad
# Adapted: test.py kept as it is; the 3D ResNeXt replaced by a small Conv3d network with 12
#   classes; the video loader by a list of 24 batches of 4 random clips (3x8x32x32) in video
#   order, 6 clips per video, whose targets are the video ids as strings (what the repository's
#   VideoID target transform gives); opt is a namespace with the used fields, result_path a
#   temporary directory; cpu, seeded.
import json
import os
import tempfile
import time
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable


class AverageMeter(object):
    """Computes and stores the average and current value"""

    def __init__(self):
        self.reset()

    def reset(self):
        self.val = 0
        self.avg = 0
        self.sum = 0
        self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


def calculate_video_results(output_buffer, video_id, test_results, class_names):
    video_outputs = torch.stack(output_buffer)
    average_scores = torch.mean(video_outputs, dim=0)
    sorted_scores, locs = torch.topk(average_scores, k=10)

    video_results = []
    for i in range(sorted_scores.size(0)):
        video_results.append({
            'label': class_names[int(locs[i])],
            'score': float(sorted_scores[i])
        })

    test_results['results'][video_id] = video_results


def test(data_loader, model, opt, class_names):
    print('test')

    model.eval()

    batch_time = AverageMeter()
    data_time = AverageMeter()

    end_time = time.time()
    output_buffer = []
    previous_video_id = ''
    test_results = {'results': {}}
    for i, (inputs, targets) in enumerate(data_loader):
        data_time.update(time.time() - end_time)

        with torch.no_grad():
            inputs = Variable(inputs)
        outputs = model(inputs)
        if not opt.no_softmax_in_test:
            outputs = F.softmax(outputs, dim=1)

        for j in range(outputs.size(0)):
            if not (i == 0 and j == 0) and targets[j] != previous_video_id:
                calculate_video_results(output_buffer, previous_video_id,
                                        test_results, class_names)
                output_buffer = []
            output_buffer.append(outputs[j].data.cpu())
            previous_video_id = targets[j]

        if (i % 100) == 0:
            with open(
                    os.path.join(opt.result_path, '{}.json'.format(
                        opt.test_subset)), 'w') as f:
                json.dump(test_results, f)

        batch_time.update(time.time() - end_time)
        end_time = time.time()

        print('[{}/{}]\t'
              'Time {batch_time.val:.3f} ({batch_time.avg:.3f})\t'
              'Data {data_time.val:.3f} ({data_time.avg:.3f})\t'.format(
                  i + 1,
                  len(data_loader),
                  batch_time=batch_time,
                  data_time=data_time))
    with open(
            os.path.join(opt.result_path, '{}.json'.format(opt.test_subset)),
            'w') as f:
        json.dump(test_results, f)

torch.manual_seed(0)
model = nn.Sequential(nn.Conv3d(3, 16, 3, padding=1), nn.BatchNorm3d(16), nn.ReLU(), nn.MaxPool3d(2),
                      nn.Conv3d(16, 32, 3, padding=1), nn.BatchNorm3d(32), nn.ReLU(),
                      nn.AdaptiveAvgPool3d(1), nn.Flatten(), nn.Linear(32, 12))
class_names = ['gesture_{}'.format(k) for k in range(12)]
clips_video_ids = ['video_{:03d}'.format(k // 6) for k in range(24 * 4)]
data_loader = [(torch.randn(4, 3, 8, 32, 32), clips_video_ids[4 * b:4 * b + 4]) for b in range(24)]
opt = SimpleNamespace(no_softmax_in_test=False, result_path=tempfile.mkdtemp(), test_subset='val')
test(data_loader, model, opt, class_names)
