# Source: https://github.com/ifzhang/FairMOT/issues/348
#   code: src/lib/tracker/basetrack.py (BaseTrack with its class attributes) and
#   src/lib/tracker/multitracker.py (STrack.__init__, update_features, activate, update;
#   JDETracker.update) at commit 4aa6297
# Adapted: the DLA-34 network is a small conv head with the same outputs (hm, wh, id, reg)
#   over random 3x64x64 frames; mot_decode, post-processing and the Kalman filter are
#   stand-ins with the same interfaces (top-K peaks in output coordinates, a constant
#   position filter); the two association steps are reduced to a greedy match on embedding
#   distance (matching.embedding_distance / linear_assignment); K 50, conf_thres 0.4,
#   reid_dim 128; 300 frames of one sequence; no image writing.
from collections import OrderedDict, deque

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class TrackState(object):
    New = 0
    Tracked = 1
    Lost = 2
    Removed = 3


class BaseTrack(object):
    _count = 0
    track_id = 0
    is_activated = False
    state = TrackState.New
    history = OrderedDict()
    features = []
    curr_feature = None
    score = 0
    start_frame = 0
    frame_id = 0
    time_since_update = 0

    @staticmethod
    def next_id():
        BaseTrack._count += 1
        return BaseTrack._count

    def mark_lost(self):
        self.state = TrackState.Lost

    def mark_removed(self):
        self.state = TrackState.Removed


class KalmanFilter(object):
    def initiate(self, measurement):
        return np.r_[measurement, np.zeros(4)], np.eye(8)

    def update(self, mean, covariance, measurement):
        return np.r_[0.5 * (mean[:4] + measurement), mean[4:]], covariance


class STrack(BaseTrack):
    def __init__(self, tlwh, score, temp_feat, buffer_size=30):
        self._tlwh = np.asarray(tlwh, dtype=np.float64)
        self.kalman_filter = None
        self.mean, self.covariance = None, None
        self.is_activated = False
        self.score = score
        self.tracklet_len = 0
        self.smooth_feat = None
        self.update_features(temp_feat)
        self.features = deque([], maxlen=buffer_size)
        self.alpha = 0.9

    def update_features(self, feat):
        feat /= np.linalg.norm(feat)
        self.curr_feat = feat
        if self.smooth_feat is None:
            self.smooth_feat = feat
        else:
            self.smooth_feat = self.alpha * self.smooth_feat + (1 - self.alpha) * feat
        self.features.append(feat)
        self.smooth_feat /= np.linalg.norm(self.smooth_feat)

    def activate(self, kalman_filter, frame_id):
        self.kalman_filter = kalman_filter
        self.track_id = self.next_id()
        self.mean, self.covariance = self.kalman_filter.initiate(self._tlwh.copy())
        self.state = TrackState.Tracked
        self.is_activated = frame_id == 1
        self.frame_id = frame_id
        self.start_frame = frame_id

    def update(self, new_track, frame_id, update_feature=True):
        self.frame_id = frame_id
        self.tracklet_len += 1
        self.mean, self.covariance = self.kalman_filter.update(self.mean, self.covariance, new_track._tlwh)
        self.state = TrackState.Tracked
        self.is_activated = True
        self.score = new_track.score
        if update_feature:
            self.update_features(new_track.curr_feat)


class CenterHead(nn.Module):
    def __init__(self, reid_dim=128):
        super().__init__()
        self.base = nn.Sequential(nn.Conv2d(3, 32, 3, stride=4, padding=1), nn.ReLU())
        self.heads = nn.ModuleDict({'hm': nn.Conv2d(32, 1, 1), 'wh': nn.Conv2d(32, 4, 1),
                                    'id': nn.Conv2d(32, reid_dim, 1), 'reg': nn.Conv2d(32, 2, 1)})

    def forward(self, x):
        y = self.base(x)
        return [{name: head(y) for name, head in self.heads.items()}]


def mot_decode(hm, wh, reg, K):
    batch, _, height, width = hm.shape
    scores, inds = torch.topk(hm.view(batch, -1), K)
    ys, xs = (inds // width).float(), (inds % width).float()
    wh_k = wh.view(batch, 4, -1).gather(2, inds.unsqueeze(1).expand(-1, 4, -1)).permute(0, 2, 1).abs()
    dets = torch.stack([xs - wh_k[..., 0], ys - wh_k[..., 1], xs + wh_k[..., 2], ys + wh_k[..., 3], scores], 2)
    return dets, inds


class JDETracker(object):
    def __init__(self, conf_thres=0.4, K=50, track_buffer=30):
        self.model = CenterHead().eval()
        self.tracked_stracks = []
        self.lost_stracks = []
        self.frame_id = 0
        self.det_thresh = conf_thres
        self.max_time_lost = track_buffer
        self.K = K
        self.kalman_filter = KalmanFilter()

    def update(self, im_blob):
        self.frame_id += 1
        with torch.no_grad():
            output = self.model(im_blob)[-1]
            hm = output['hm'].sigmoid_()
            id_feature = F.normalize(output['id'], dim=1)
            dets, inds = mot_decode(hm, output['wh'], reg=output['reg'], K=self.K)
            id_feature = id_feature.view(1, id_feature.shape[1], -1).gather(
                2, inds.unsqueeze(1).expand(-1, id_feature.shape[1], -1)).permute(0, 2, 1)
            id_feature = id_feature.squeeze(0).cpu().numpy()
        dets = dets.squeeze(0).cpu().numpy()
        remain_inds = dets[:, 4] > self.det_thresh
        dets = dets[remain_inds]
        id_feature = id_feature[remain_inds]
        detections = [STrack(tlbrs[:4] - np.r_[0, 0, tlbrs[:2]], tlbrs[4], f, 30)
                      for (tlbrs, f) in zip(dets[:, :5], id_feature)]
        pool = self.tracked_stracks + self.lost_stracks
        unmatched = list(range(len(detections)))
        for track in pool:
            if not unmatched:
                break
            dists = [1 - float(np.dot(track.smooth_feat, detections[i].curr_feat)) for i in unmatched]
            best = int(np.argmin(dists))
            if dists[best] < 0.4:
                track.update(detections[unmatched.pop(best)], self.frame_id)
        for track in pool:
            if track.frame_id != self.frame_id:
                track.mark_lost()
        for i in unmatched:
            detections[i].activate(self.kalman_filter, self.frame_id)
        self.tracked_stracks = [t for t in pool if t.state == TrackState.Tracked] + [detections[i] for i in unmatched]
        self.lost_stracks = [t for t in pool if t.state == TrackState.Lost
                             and self.frame_id - t.frame_id <= self.max_time_lost]
        return [t for t in self.tracked_stracks if t.is_activated]


torch.manual_seed(0)
tracker = JDETracker()
for frame_id in range(300):
    img = torch.randn(1, 3, 64, 64)
    online_targets = tracker.update(img)
    if frame_id % 100 == 0:
        print(frame_id, len(online_targets), len(tracker.tracked_stracks))
