# Source: https://github.com/mit-ll-responsible-ai/equine/issues/182
#   code: src/equine/equine_protonet.py (Protonet, EquineProtonet.predict, _compute_ood_dist,
#   _compute_outlier_scores, _fit_outlier_scores) and src/equine/equine.py (EquineOutput) at 4b49040
# Adapted: Protonet and EquineProtonet.predict kept with their names and structure for the
#   diagonal covariance with epsilon regularisation (full/unit covariance, relative Mahalanobis
#   distance, temperature, training, icontract/beartype and saving dropped); scipy's gaussian_kde
#   replaced by a small numpy kernel density stand-in with the same integrate_box_1d call; the
#   embedding model is a small MLP on 32 features, the support 3 classes of 20 random examples,
#   the outlier scores fitted on 60 random calibration examples; the caller scores 40 incoming
#   batches of 256 examples with predict() and keeps the EquineOutput of each batch for its
#   report, as the output object is meant for; cpu, seeded.
import math
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import torch


@dataclass
class EquineOutput:
    classes: torch.Tensor
    ood_scores: torch.Tensor
    embeddings: torch.Tensor


class gaussian_kde:
    def __init__(self, dataset):
        self.dataset = np.asarray(dataset, dtype=np.float64)
        self.bw = 1.06 * max(self.dataset.std(), 1e-3) * len(self.dataset) ** (-0.2)

    def integrate_box_1d(self, low, high):
        lo = (float(low) - self.dataset) / self.bw
        return float(np.mean([0.5 * (1.0 - math.erf(v / math.sqrt(2.0))) for v in lo]))


class Protonet(torch.nn.Module):
    def __init__(self, embedding_model, emb_out_dim, epsilon, device="cpu"):
        super().__init__()
        self.embedding_model = embedding_model
        self.epsilon = epsilon
        self.emb_out_dim = emb_out_dim
        self.device = device
        self.support = OrderedDict()
        self.support_embeddings = OrderedDict()
        self.model_head = torch.nn.Identity()

    def compute_embeddings(self, X):
        model_embeddings = self.embedding_model(X.to(self.device))
        head_embeddings = self.model_head(model_embeddings)
        return head_embeddings

    def compute_prototypes(self):
        proto_list = []
        for label in self.support_embeddings:
            class_prototype = torch.mean(self.support_embeddings[label], dim=0)
            proto_list.append(class_prototype)
        return torch.stack(proto_list)

    def compute_covariance(self):
        class_cov_dict = OrderedDict().fromkeys(self.support_embeddings.keys(), torch.Tensor())
        for label in self.support_embeddings.keys():
            class_cov_dict[label] = torch.var(self.support_embeddings[label], dim=0) + self.epsilon
        return torch.stack(list(class_cov_dict.values()))

    def compute_distance(self, X_embed, mu, cov):
        _queries = torch.unsqueeze(X_embed, 1)
        diff = torch.sub(mu, _queries)
        sq_diff = diff ** 2
        div = torch.div(sq_diff.to(self.device), cov.to(self.device))
        dist = torch.nan_to_num(div)
        dist = torch.sum(dist, dim=2)
        dist = dist.squeeze(dim=1)
        dist = torch.sqrt(dist + self.epsilon)
        return dist

    def compute_classes(self, distances):
        return torch.nn.functional.softmax(torch.neg(distances), dim=-1)

    def forward(self, X):
        X_embed = self.compute_embeddings(X)
        if X_embed.shape == torch.Size([self.emb_out_dim]):
            X_embed = X_embed.unsqueeze(dim=0)
        distances = self.compute_distance(X_embed, self.prototypes, self.covariance)
        classes = self.compute_classes(distances)
        return classes, distances

    def update_support(self, support):
        self.support = support
        support_embs = OrderedDict().fromkeys(support.keys(), torch.Tensor())
        for label in support:
            support_embs[label] = self.compute_embeddings(support[label])
        self.support_embeddings = support_embs
        self.prototypes = self.compute_prototypes()
        self.covariance = self.compute_covariance()


class EquineProtonet(torch.nn.Module):
    def __init__(self, embedding_model, emb_out_dim, epsilon=1e-4):
        super().__init__()
        self.model = Protonet(embedding_model, emb_out_dim, epsilon)
        self.outlier_score_kde = OrderedDict()

    def _fit_outlier_scores(self, ood_dists, calib_y):
        for label in self.model.support_embeddings.keys():
            class_ood_dists = ood_dists[calib_y == int(label)].cpu().detach().numpy()
            self.outlier_score_kde[label] = gaussian_kde(class_ood_dists)

    def _compute_outlier_scores(self, ood_dists, predictions):
        ood_scores = torch.zeros_like(ood_dists)
        for i in range(len(predictions)):
            predicted_class = int(torch.argmax(predictions[i, :]))
            p_value = self.outlier_score_kde[int(predicted_class)].integrate_box_1d(
                ood_dists[i].detach().cpu().numpy(), np.inf)
            ood_scores[i] = 1.0 - np.clip(p_value, 0.0, 1.0)
        return ood_scores

    def _compute_ood_dist(self, X_embeddings, predictions, distances):
        preds = torch.argmax(predictions, dim=1)
        preds = preds.unsqueeze(dim=-1)
        ood_dist = distances.gather(1, preds)
        return torch.reshape(ood_dist, (-1,))

    def predict(self, X):
        X_embed = self.model.compute_embeddings(X)
        if X_embed.shape == torch.Size([self.model.emb_out_dim]):
            X_embed = X_embed.unsqueeze(dim=0)
        preds, dists = self.model(X)
        ood_dist = self._compute_ood_dist(X_embed, preds, dists)
        ood_scores = self._compute_outlier_scores(ood_dist, preds)
        return EquineOutput(classes=preds, ood_scores=ood_scores, embeddings=X_embed)


torch.manual_seed(0)
embedding_model = torch.nn.Sequential(torch.nn.Linear(32, 128), torch.nn.ReLU(), torch.nn.Linear(128, 128),
                                      torch.nn.ReLU(), torch.nn.Linear(128, 16))
model = EquineProtonet(embedding_model, emb_out_dim=16)
model.eval()
support = OrderedDict((label, torch.randn(20, 32) + 2.0 * label) for label in range(3))
model.model.update_support(support)
calib_x = torch.cat([torch.randn(20, 32) + 2.0 * label for label in range(3)])
calib_y = torch.arange(3).repeat_interleave(20)
calib_preds, calib_dists = model.model(calib_x)
model._fit_outlier_scores(model._compute_ood_dist(None, calib_preds, calib_dists), calib_y)

outputs = []
for batch in range(40):
    X = torch.randn(256, 32) + 2.0 * (batch % 3)
    out = model.predict(X)
    outputs.append(out)
    if batch % 10 == 0:
        print(batch, float(out.ood_scores.mean()), out.classes.argmax(1).bincount(minlength=3).tolist())
