# Source: https://github.com/IBM/mi-prometheus/issues/111
#   code: Worker.predict_evaluate_collect (miprometheus/workers/worker.py), StatisticsCollector
#   (miprometheus/utils/statistics_collector.py), ImageToClassProblem.calculate_accuracy /
#   add_statistics / collect_statistics and the epoch loop of OfflineTrainer.forward
#   (miprometheus/workers/offline_trainer.py) at d585f9a2^: predict_evaluate_collect stores the
#   loss tensor with stat_col['loss'] = loss, and the collector appends every value to a list
#   that is emptied at the start of the next epoch
# Adapted: the simplecnn_mnist configuration reduced to a small convolutional network and 40
#   batches of 32 random 1x28x28 images per epoch, 2 epochs; the parameter registry, CSV and
#   TensorBoard export, visualisation, curriculum and validation dropped (export_to_string is
#   logged every 10 episodes and the epoch aggregate is the mean of the collected losses);
#   DataDict replaced by a dict; cpu, seeded.
import torch
import torch.nn as nn


class StatisticsCollector(object):
    def __init__(self):
        super(StatisticsCollector, self).__init__()
        self.statistics = dict()
        self.formatting = dict()

    def add_statistic(self, key, formatting):
        self.formatting[key] = formatting
        self.statistics[key] = list()

    def __getitem__(self, key):
        return self.statistics[key]

    def __setitem__(self, key, value):
        self.statistics[key].append(value)

    def __contains__(self, key):
        return key in self.statistics

    def empty(self):
        for key in self.statistics.keys():
            del self.statistics[key][:]

    def export_to_string(self, additional_tag=''):
        stat_str = ''
        for key, value in self.statistics.items():
            stat_str += key + ' '
            format_str = self.formatting.get(key, '{}')
            stat_str += format_str.format(value[-1]) + "; "
        stat_str = stat_str[:-2] + " " + additional_tag
        return stat_str


class ImageToClassProblem:
    def __init__(self):
        self.loss_function = nn.CrossEntropyLoss()

    def evaluate_loss(self, data_dict, logits):
        return self.loss_function(logits, data_dict['targets'])

    def calculate_accuracy(self, data_dict, logits):
        pred = logits.max(1, keepdim=True)[1]
        correct = pred.eq(data_dict['targets'].view_as(pred)).sum().item()
        batch_size = logits.size(0)
        accuracy = correct / batch_size
        return accuracy

    def add_statistics(self, stat_col):
        stat_col.add_statistic('acc', '{:12.10f}')
        stat_col.add_statistic('batch_size', '{:06d}')

    def collect_statistics(self, stat_col, data_dict, logits):
        stat_col['acc'] = self.calculate_accuracy(data_dict, logits)
        stat_col['batch_size'] = logits.shape[0]


class SimpleConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3), nn.ReLU(),
                                 nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64 * 5 * 5, 10))

    def forward(self, data_dict):
        return self.net(data_dict['images'])

    def collect_statistics(self, stat_col, data_dict, logits):
        pass


class OfflineTrainer:
    def __init__(self, model, problem, dataloader, epoch_limit=2, logging_interval=10):
        self.model, self.training_problem, self.training_dataloader = model, problem, dataloader
        self.epoch_limit, self.logging_interval = epoch_limit, logging_interval
        self.optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        self.training_stat_col = StatisticsCollector()
        self.training_stat_col.add_statistic('epoch', '{:02d}')
        self.training_stat_col.add_statistic('episode', '{:06d}')
        self.training_stat_col.add_statistic('loss', '{:12.10f}')
        self.training_problem.add_statistics(self.training_stat_col)

    def predict_evaluate_collect(self, model, problem, data_dict, stat_col, episode, epoch=None):
        logits = model(data_dict)
        loss = problem.evaluate_loss(data_dict, logits)
        if ('epoch' in stat_col) and (epoch is not None):
            stat_col['epoch'] = epoch
        stat_col['episode'] = episode
        # Collect loss as float.
        stat_col['loss'] = loss
        problem.collect_statistics(stat_col, data_dict, logits)
        model.collect_statistics(stat_col, data_dict, logits)
        return logits, loss

    def forward(self):
        episode = -1
        for epoch in range(self.epoch_limit):
            self.training_stat_col.empty()
            for training_dict in self.training_dataloader:
                episode += 1
                self.optimizer.zero_grad()
                self.model.train()
                logits, loss = self.predict_evaluate_collect(self.model, self.training_problem,
                                                             training_dict, self.training_stat_col, episode, epoch)
                loss.backward()
                self.optimizer.step()
                if episode % self.logging_interval == 0:
                    print(self.training_stat_col.export_to_string())
            losses = self.training_stat_col['loss']
            print('[Epoch {}] mean loss {:.6f}'.format(epoch, sum(l.item() for l in losses) / len(losses)))


torch.manual_seed(0)
loader = [{'images': torch.randn(32, 1, 28, 28), 'targets': torch.randint(0, 10, (32,))} for _ in range(40)]
trainer = OfflineTrainer(SimpleConvNet(), ImageToClassProblem(), loader)
trainer.forward()
