# Source: https://github.com/rmunro/pytorch_active_learning/issues/7
#   code: advanced_active_learning.py (AdvancedActiveLearning.get_high_uncertainty_cluster),
#   uncertainty_sampling.py (UncertaintySampling.least_confidence) and the SimpleTextClassifier
#   of active_learning_basics.py, at the commit that fixed the issue (`total_uncertainty += score`)
# Adapted: get_high_uncertainty_cluster and least_confidence kept as they are; CosineClusters
#   (pytorch_clusters.py) replaced by a stand-in with the same add_random_training_items /
#   add_items_to_best_cluster / clusters / get_random_members interface that assigns items by
#   cosine similarity to random centroids; the news-headline data by 300 random bag-of-words
#   items over a 200-word vocabulary; the model untrained; 6 clusters, 3 clustering epochs; cpu,
#   seeded.
import random
from random import shuffle

import torch
import torch.nn as nn
import torch.nn.functional as F


class SimpleTextClassifier(nn.Module):
    def __init__(self, num_labels, vocab_size):
        super(SimpleTextClassifier, self).__init__()
        self.linear1 = nn.Linear(vocab_size, 128)
        self.linear2 = nn.Linear(128, num_labels)

    def forward(self, feature_vec, return_all_layers=False):
        hidden1 = self.linear1(feature_vec).clamp(min=0)
        output = self.linear2(hidden1)
        log_softmax = F.log_softmax(output, dim=1)
        if return_all_layers:
            return [hidden1, output, log_softmax]
        else:
            return log_softmax


class Cluster():
    def __init__(self, feature_idx):
        self.feature_idx = feature_idx
        self.members = {}

    def get_random_members(self, number=1):
        keys = list(self.members.keys())
        shuffle(keys)
        return [self.members[key] for key in keys[:number]]


class CosineClusters():
    def __init__(self, num_clusters=100):
        self.clusters = [Cluster(i) for i in range(num_clusters)]
        self.centroids = torch.randn(num_clusters, VOCAB)

    def add_random_training_items(self, items):
        for item in items:
            random.choice(self.clusters).members[item[0]] = item

    def add_items_to_best_cluster(self, items):
        added = 0
        for item in items:
            vec = make_feature_vector(item[1])[0]
            best = int(F.cosine_similarity(self.centroids, vec.unsqueeze(0)).argmax())
            for cluster in self.clusters:
                if item[0] in cluster.members and cluster is not self.clusters[best]:
                    del cluster.members[item[0]]
                    added += 1
            self.clusters[best].members[item[0]] = item
        return added


class UncertaintySampling():
    def least_confidence(self, prob_dist, sorted=False):
        if sorted:
            simple_least_conf = prob_dist.data[0]
        else:
            simple_least_conf = torch.max(prob_dist)
        num_labels = prob_dist.numel()
        normalized_least_conf = (1 - simple_least_conf) * (num_labels / (num_labels - 1))
        return normalized_least_conf.item()


class AdvancedActiveLearning():
    def get_high_uncertainty_cluster(self, model, unlabeled_data, method, feature_method,
                                     number=10, num_clusters=20, max_epochs=10, limit=10000):
        if limit > 0:
            shuffle(unlabeled_data)
            unlabeled_data = unlabeled_data[:limit]

        unlabeled_clusters = CosineClusters(num_clusters)
        unlabeled_clusters.add_random_training_items(unlabeled_data)

        for i in range(0, max_epochs):
            print("Epoch "+str(i))
            added = unlabeled_clusters.add_items_to_best_cluster(unlabeled_data)
            if added == 0:
                break

        most_uncertain_cluster = None
        highest_average_uncertainty = 0.0

        for cluster in unlabeled_clusters.clusters:
            total_uncertainty = 0.0
            count = 0

            item_keys = list(cluster.members.keys())

            for key in item_keys:
                item = cluster.members[key]
                text = item[1]

                feature_vector = feature_method(text)
                hidden, logits, log_probs = model(feature_vector, return_all_layers=True)

                prob_dist = torch.exp(log_probs)

                score = method(prob_dist.data[0])

                total_uncertainty += score
                count += 1

            average_uncertainty = total_uncertainty / count if count else 0.0
            if average_uncertainty > highest_average_uncertainty:
                highest_average_uncertainty = average_uncertainty
                most_uncertain_cluster = cluster

        samples = most_uncertain_cluster.get_random_members(number)
        return samples


VOCAB = 200
random.seed(0)
torch.manual_seed(0)


def make_feature_vector(features):
    vec = torch.zeros(VOCAB)
    for feature in features:
        vec[feature] += 1
    return vec.view(1, -1)


unlabeled_data = [[str(i), [random.randrange(VOCAB) for _ in range(12)], "", "", 0] for i in range(300)]
model = SimpleTextClassifier(2, VOCAB)
sampler = AdvancedActiveLearning()
uncertainty = UncertaintySampling()
samples = sampler.get_high_uncertainty_cluster(model, unlabeled_data, method=uncertainty.least_confidence,
                                               feature_method=make_feature_vector, number=10,
                                               num_clusters=6, max_epochs=3)
print(len(samples))
