# Source: https://github.com/KaiyangZhou/deep-person-reid/pull/493
#   code: Engine.test(), Engine._evaluate() with its _feature_extraction(),
#   extract_features() and parse_data_for_eval() of torchreid/engine/engine.py before the pull
#   request: _feature_extraction extends pids_ and camids_ with the batch's pid and camid
#   tensors (one 0-dim tensor per image) until the whole query and gallery sets are read
# Adapted: the datamanager and loaders replaced by lists of batches (dicts with 'img', 'pid',
#   'camid') over a query set of 30 and a gallery set of 150 batches of 32 random 3x32x16 crops;
#   the OSNet/ResNet by a small convolutional embedder (256-d features); metrics.evaluate_rank
#   reduced to rank-1 accuracy on the euclidean distance matrix; AverageMeter timing, re-ranking,
#   visrank and tensorboard dropped; cpu, seeded.
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def compute_distance_matrix(input1, input2, metric='euclidean'):
    return torch.cdist(input1, input2)


def evaluate_rank(distmat, q_pids, g_pids, q_camids, g_camids):
    indices = np.argsort(distmat, axis=1)
    matches = (g_pids[indices] == q_pids[:, np.newaxis])
    keep = ~((g_pids[indices] == q_pids[:, np.newaxis]) & (g_camids[indices] == q_camids[:, np.newaxis]))
    rank1 = [m[k][0] if k.any() else 0 for m, k in zip(matches, keep)]
    return np.array([np.mean(rank1)]), 0.0


class Engine:
    def __init__(self, model, test_loader):
        self.model = model
        self.test_loader = test_loader
        self.use_gpu = False

    def set_model_mode(self, mode='train'):
        self.model.train(mode == 'train')

    def test(self, epoch, dist_metric='euclidean', normalize_feature=False, ranks=[1]):
        self.set_model_mode('eval')
        targets = list(self.test_loader.keys())
        for name in targets:
            print('##### Evaluating {} #####'.format(name))
            query_loader = self.test_loader[name]['query']
            gallery_loader = self.test_loader[name]['gallery']
            rank1 = self._evaluate(epoch, dataset_name=name, query_loader=query_loader,
                                   gallery_loader=gallery_loader, dist_metric=dist_metric,
                                   normalize_feature=normalize_feature, ranks=ranks)
        return rank1

    @torch.no_grad()
    def _evaluate(self, epoch, dataset_name='', query_loader=None, gallery_loader=None,
                  dist_metric='euclidean', normalize_feature=False, ranks=[1]):

        def _feature_extraction(data_loader):
            f_, pids_, camids_ = [], [], []
            for batch_idx, data in enumerate(data_loader):
                imgs, pids, camids = self.parse_data_for_eval(data)
                if self.use_gpu:
                    imgs = imgs.cuda()
                end = time.time()
                features = self.extract_features(imgs)
                features = features.data.cpu()
                f_.append(features)
                pids_.extend(pids)
                camids_.extend(camids)
            f_ = torch.cat(f_, 0)
            pids_ = np.asarray(pids_)
            camids_ = np.asarray(camids_)
            return f_, pids_, camids_

        print('Extracting features from query set ...')
        qf, q_pids, q_camids = _feature_extraction(query_loader)
        print('Done, obtained {}-by-{} matrix'.format(qf.size(0), qf.size(1)))

        print('Extracting features from gallery set ...')
        gf, g_pids, g_camids = _feature_extraction(gallery_loader)
        print('Done, obtained {}-by-{} matrix'.format(gf.size(0), gf.size(1)))

        if normalize_feature:
            qf = F.normalize(qf, p=2, dim=1)
            gf = F.normalize(gf, p=2, dim=1)

        distmat = compute_distance_matrix(qf, gf, dist_metric)
        distmat = distmat.numpy()
        cmc, mAP = evaluate_rank(distmat, q_pids, g_pids, q_camids, g_camids)
        print('** Results ** Rank-1: {:.1%}'.format(cmc[0]))
        return cmc[0]

    def extract_features(self, input):
        return self.model(input)

    def parse_data_for_eval(self, data):
        imgs = data['img']
        pids = data['pid']
        camids = data['camid']
        return imgs, pids, camids


def make_loader(n_batches):
    return [{'img': torch.randn(32, 3, 32, 16), 'pid': torch.randint(0, 300, (32,)),
             'camid': torch.randint(0, 6, (32,))} for _ in range(n_batches)]


torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 32, 3, stride=2, padding=1), nn.ReLU(), nn.Conv2d(32, 64, 3, stride=2, padding=1),
                      nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 256))
engine = Engine(model, {'market1501': {'query': make_loader(30), 'gallery': make_loader(150)}})
engine.test(epoch=0)
