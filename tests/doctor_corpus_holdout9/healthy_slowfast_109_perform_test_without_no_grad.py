# Source: https://github.com/facebookresearch/SlowFast/issues/109
#   code: perform_test() of tools/test_net.py and TestMeter of slowfast/utils/meters.py at
#   5013992 (the state the issue describes: no torch.no_grad() around the forward pass of the
#   multi-view test; the predictions reach TestMeter.update_stats as preds.detach().cpu())
# Adapted: the SlowFast model replaced by a small 3D convolutional classifier; the Kinetics
#   test loader by a stand-in yielding 15 batches of 8 clips (3x8x32x32, 40 videos x 3 clips,
#   400 classes) with labels, clip indices and an empty meta dict; .cuda() calls dropped;
#   Timer, logging.log_json_stats and metrics.topks_correct reduced to what is used; the
#   detection branch and multi-GPU gathering dropped; cfg is a namespace; cpu, seeded.
import datetime
import json
import time
from types import SimpleNamespace

import torch
import torch.nn as nn


class Timer:
    def __init__(self):
        self.reset()

    def reset(self):
        self._start = time.perf_counter()
        self._paused = None

    def pause(self):
        self._paused = time.perf_counter()

    def seconds(self):
        return (self._paused or time.perf_counter()) - self._start


def log_json_stats(stats):
    print("json_stats: {:s}".format(json.dumps(stats, sort_keys=True)))


def topks_correct(preds, labels, ks):
    _top_max_k_vals, top_max_k_inds = torch.topk(preds, max(ks), dim=1, largest=True, sorted=True)
    top_max_k_inds = top_max_k_inds.t()
    rep_max_k_labels = labels.view(1, -1).expand_as(top_max_k_inds)
    top_max_k_correct = top_max_k_inds.eq(rep_max_k_labels)
    return [top_max_k_correct[:k, :].float().sum() for k in ks]


class TestMeter(object):
    def __init__(self, num_videos, num_clips, num_cls, overall_iters):
        self.iter_timer = Timer()
        self.num_clips = num_clips
        self.overall_iters = overall_iters
        # Initialize tensors.
        self.video_preds = torch.zeros((num_videos, num_cls))
        self.video_labels = torch.zeros((num_videos)).long()
        self.clip_count = torch.zeros((num_videos)).long()
        # Reset metric.
        self.reset()

    def reset(self):
        self.clip_count.zero_()
        self.video_preds.zero_()
        self.video_labels.zero_()

    def update_stats(self, preds, labels, clip_ids):
        for ind in range(preds.shape[0]):
            vid_id = int(clip_ids[ind]) // self.num_clips
            self.video_labels[vid_id] = labels[ind]
            self.video_preds[vid_id] += preds[ind]
            self.clip_count[vid_id] += 1

    def log_iter_stats(self, cur_iter):
        eta_sec = self.iter_timer.seconds() * (self.overall_iters - cur_iter)
        eta = str(datetime.timedelta(seconds=int(eta_sec)))
        stats = {
            "split": "test_iter",
            "cur_iter": "{}".format(cur_iter + 1),
            "eta": eta,
            "time_diff": self.iter_timer.seconds(),
        }
        log_json_stats(stats)

    def iter_tic(self):
        self.iter_timer.reset()

    def iter_toc(self):
        self.iter_timer.pause()

    def finalize_metrics(self, ks=(1, 5)):
        num_topks_correct = topks_correct(self.video_preds, self.video_labels, ks)
        topks = [(x / self.video_preds.size(0)) * 100.0 for x in num_topks_correct]
        stats = {"split": "test_final"}
        for k, topk in zip(ks, topks):
            stats["top{}_acc".format(k)] = "{:.{prec}f}".format(topk, prec=2)
        log_json_stats(stats)


def perform_test(test_loader, model, test_meter, cfg):
    # Enable eval mode.
    model.eval()
    test_meter.iter_tic()

    for cur_iter, (inputs, labels, video_idx, meta) in enumerate(test_loader):
        # Perform the forward pass.
        preds = model(inputs)

        test_meter.iter_toc()
        # Update and log stats.
        test_meter.update_stats(
            preds.detach().cpu(),
            labels.detach().cpu(),
            video_idx.detach().cpu(),
        )
        test_meter.log_iter_stats(cur_iter)

        test_meter.iter_tic()

    # Log epoch stats and print the final testing results.
    test_meter.finalize_metrics()
    test_meter.reset()


def test_loader_for(num_videos, num_clips, batch_size):
    clip_ids = torch.arange(num_videos * num_clips)
    labels = torch.randint(0, 400, (num_videos,))
    for start in range(0, len(clip_ids), batch_size):
        idx = clip_ids[start:start + batch_size]
        yield torch.randn(len(idx), 3, 8, 32, 32), labels[idx // num_clips], idx, {}


torch.manual_seed(0)
cfg = SimpleNamespace(NUM_GPUS=0, TEST=SimpleNamespace(NUM_ENSEMBLE_VIEWS=3, BATCH_SIZE=8),
                      MODEL=SimpleNamespace(NUM_CLASSES=400))
model = nn.Sequential(nn.Conv3d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv3d(32, 64, 3, stride=2, padding=1),
                      nn.ReLU(), nn.AdaptiveAvgPool3d(1), nn.Flatten(), nn.Linear(64, cfg.MODEL.NUM_CLASSES),
                      nn.Softmax(dim=1))
num_videos = 40
test_meter = TestMeter(num_videos, cfg.TEST.NUM_ENSEMBLE_VIEWS, cfg.MODEL.NUM_CLASSES,
                       num_videos * cfg.TEST.NUM_ENSEMBLE_VIEWS // cfg.TEST.BATCH_SIZE)
perform_test(test_loader_for(num_videos, cfg.TEST.NUM_ENSEMBLE_VIEWS, cfg.TEST.BATCH_SIZE), model, test_meter, cfg)
