# Source: https://github.com/RUCAIBox/RecBole/pull/307
#   code: recbox/trainer/trainer.py (Trainer._build_optimizer, _train_epoch, _check_nan, the
#   start of fit), recbox/model/general_recommender/bprmf.py and recbox/model/loss.py (BPRLoss)
#   at f8d87147^ (the parent of the fix)
# Adapted: the pieces in one file; Trainer.__init__ keeps only what training uses (no
#   evaluator, checkpoint dir or logger); GeneralRecommender/Interaction replaced by a plain
#   nn.Module and a dict with .to(); random user/item pairs; 3 epochs of 16 batches, cpu.
from time import time

import torch
import torch.nn as nn
import torch.optim as optim


class BPRLoss(nn.Module):
    def __init__(self, gamma=1e-10):
        super(BPRLoss, self).__init__()
        self.gamma = gamma

    def forward(self, pos_score, neg_score):
        loss = - torch.log(self.gamma + torch.sigmoid(pos_score - neg_score)).mean()
        return loss


class BPRMF(nn.Module):
    USER_ID, ITEM_ID, NEG_ITEM_ID = 'user_id', 'item_id', 'neg_item_id'

    def __init__(self, config, dataset):
        super(BPRMF, self).__init__()
        self.n_users, self.n_items = dataset['n_users'], dataset['n_items']

        # load parameters info
        self.embedding_size = config['embedding_size']

        # define layers and loss
        self.user_embedding = nn.Embedding(self.n_users, self.embedding_size)
        self.item_embedding = nn.Embedding(self.n_items, self.embedding_size)
        self.loss = BPRLoss()

    def get_user_embedding(self, user):
        return self.user_embedding(user)

    def get_item_embedding(self, item):
        return self.item_embedding(item)

    def forward(self, user, item):
        user_e = self.get_user_embedding(user)
        item_e = self.get_item_embedding(item)
        return user_e, item_e

    def calculate_loss(self, interaction):
        user = interaction[self.USER_ID]
        pos_item = interaction[self.ITEM_ID]
        neg_item = interaction[self.NEG_ITEM_ID]

        user_e, pos_e = self.forward(user, pos_item)
        neg_e = self.get_item_embedding(neg_item)
        pos_item_score, neg_item_score = torch.mul(user_e, pos_e).sum(dim=1), torch.mul(user_e, neg_e).sum(dim=1)
        loss = self.loss(pos_item_score, neg_item_score)
        return loss


class Interaction(dict):
    def to(self, device):
        return Interaction({k: v.to(device) for k, v in self.items()})


class Trainer(object):
    def __init__(self, config, model):
        self.config = config
        self.model = model
        self.learner = config['learner']
        self.learning_rate = config['learning_rate']
        self.epochs = config['epochs']
        self.device = config['device']
        self.start_epoch = 0
        self.train_loss_dict = dict()
        self.optimizer = self._build_optimizer()

    def _build_optimizer(self):
        # todo: Avoid clear text strings
        if self.learner.lower() == 'adam':
            optimizer = optim.Adam(self.model.parameters(), lr=self.learning_rate)
        elif self.learner.lower() == 'sgd':
            optimizer = optim.SGD(self.model.parameters(), lr=self.learning_rate)
        else:
            optimizer = optim.Adam(self.model.parameters(), lr=self.learning_rate)
        return optimizer

    def _train_epoch(self, train_data, epoch_idx):
        self.model.train()
        losses_list = []
        for batch_idx, interaction in enumerate(train_data):
            interaction = interaction.to(self.device)
            self.optimizer.zero_grad()
            losses = self.model.calculate_loss(interaction)
            loss = sum(losses) if isinstance(losses, tuple) else losses
            self._check_nan(loss)
            loss.backward()
            self.optimizer.step()
            losses_list.append(losses)
        if isinstance(losses_list[0], tuple):
            total_losses = []
            for j in range(len(losses_list[0])):
                total_losses.append(sum([losses[j] for losses in losses_list]).item())
            return tuple(total_losses)

        else:
            return sum(losses_list).item()

    def _check_nan(self, loss):
        if torch.isnan(loss):
            raise ValueError('Training loss is nan')

    def fit(self, train_data, valid_data=None, verbose=True, saved=True):
        for epoch_idx in range(self.start_epoch, self.epochs):
            # train
            training_start_time = time()
            train_loss = self._train_epoch(train_data, epoch_idx)
            self.train_loss_dict[epoch_idx] = sum(train_loss) if isinstance(train_loss, tuple) else train_loss
            if verbose:
                print('epoch %d training [time: %.2fs, train loss: %.4f]'
                      % (epoch_idx, time() - training_start_time, self.train_loss_dict[epoch_idx]))


if __name__ == '__main__':
    torch.manual_seed(0)
    config = {'learner': 'adam', 'learning_rate': 0.001, 'epochs': 3, 'device': torch.device('cpu'),
              'embedding_size': 64}
    dataset = {'n_users': 5000, 'n_items': 8000}
    train_data = [Interaction(user_id=torch.randint(0, 5000, (2048,)),
                              item_id=torch.randint(0, 8000, (2048,)),
                              neg_item_id=torch.randint(0, 8000, (2048,))) for _ in range(16)]
    model = BPRMF(config, dataset)
    trainer = Trainer(config, model)
    trainer.fit(train_data)
