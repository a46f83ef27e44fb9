# Source: https://github.com/skorch-dev/skorch/issues/218
#   code: skorch/net.py, skorch/callbacks/scoring.py, logging.py and history.py at commit
#   048e1b1 (the parent of the merge of pull request #219)
# Adapted: the parts of NeuralNet, NeuralNetClassifier, BatchScoring, EpochScoring,
#   EpochTimer and History on the fit path copied without docstrings (parameter routing by
#   prefix, warm start, deprecation checks, device warnings and the regressor dropped);
#   sklearn's check_scoring/_score replaced by stubs with the same call signature
#   ('accuracy' compares net.predict with y), CVSplit(5, stratified=True) by a stub taking
#   the last fifth as the validation set, PrintLog by one print per epoch; the reporter's
#   Pointnet (not shown in the issue) written as a small PointNet classifier ending in
#   softmax, the quickstart's NeuralNetClassifier(...).fit(X, y) call kept; 640 random
#   clouds of 256 points, 4 classes, batch_size 8, 3 epochs, cpu.
import time
from functools import partial

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader


def to_tensor(X, device):
    if isinstance(X, torch.Tensor):
        return X.to(device)
    return torch.as_tensor(np.asarray(X)).to(device)


def to_numpy(X):
    if isinstance(X, np.ndarray):
        return X
    if X.is_cuda:
        X = X.cpu()
    if X.requires_grad:
        X = X.detach()
    return X.numpy()


def get_len(data):
    return len(data)


def is_dataset(x):
    return isinstance(x, torch.utils.data.Dataset)


class Dataset(torch.utils.data.Dataset):
    def __init__(self, X, y=None, device=None):
        self.X = X
        self.y = y
        self.device = device

    def __len__(self):
        return len(self.X)

    def __getitem__(self, i):
        yi = self.y[i] if self.y is not None else torch.Tensor([0])
        return self.X[i], yi


class CVSplit(object):
    def __init__(self, cv=5, stratified=False):
        self.cv = cv
        self.stratified = stratified

    def __call__(self, dataset, y=None, **fit_params):
        n_valid = len(dataset) // self.cv
        n_train = len(dataset) - n_valid
        return (Dataset(dataset.X[:n_train], dataset.y[:n_train]),
                Dataset(dataset.X[n_train:], dataset.y[n_train:]))


def check_scoring(estimator, scoring):
    if scoring == 'accuracy':
        return lambda est, X, y: float(np.mean(est.predict(X) == y))
    return scoring


def _score(estimator, X_test, y_test, scorer, is_multimetric=False):
    return scorer(estimator, X_test, y_test)


class History(list):
    def new_epoch(self):
        self.append({'batches': []})

    def new_batch(self):
        self[-1]['batches'].append({})

    def record(self, attr, value):
        self[-1][attr] = value

    def record_batch(self, attr, value):
        self[-1]['batches'][-1][attr] = value

    def __getitem__(self, i):
        if isinstance(i, (int, slice)):
            return super().__getitem__(i)
        epoch, _, batch, key = i
        batches = super().__getitem__(epoch)['batches']
        if isinstance(batch, slice):
            keys = [key] if isinstance(key, str) else key
            rows = [b for b in batches[batch] if all(k in b for k in keys)]
            if not rows:
                raise KeyError(key)
            if isinstance(key, str):
                return [b[key] for b in rows]
            return [tuple(b[k] for k in key) for b in rows]
        return batches[batch][key]


class Callback:
    def initialize(self):
        return self

    def on_train_begin(self, net, **kwargs):
        pass

    def on_train_end(self, net, **kwargs):
        pass

    def on_epoch_begin(self, net, **kwargs):
        pass

    def on_epoch_end(self, net, **kwargs):
        pass

    def on_batch_begin(self, net, **kwargs):
        pass

    def on_batch_end(self, net, **kwargs):
        pass

    def on_grad_computed(self, net, named_parameters, **kwargs):
        pass


class EpochTimer(Callback):
    def __init__(self, **kwargs):
        super(EpochTimer, self).__init__(**kwargs)
        self.epoch_start_time_ = None

    def on_epoch_begin(self, net, **kwargs):
        self.epoch_start_time_ = time.time()

    def on_epoch_end(self, net, **kwargs):
        net.history.record('dur', time.time() - self.epoch_start_time_)


class PrintLog(Callback):
    def on_epoch_end(self, net, **kwargs):
        row = net.history[-1]
        print(' '.join('{}={:.4f}'.format(k, v) for k, v in row.items()
                       if k != 'batches' and isinstance(v, (int, float))))


class cache_net_infer:
    def __init__(self, net, use_caching, y_preds):
        self.net = net
        self.use_caching = use_caching
        self.y_preds = y_preds

    def __enter__(self):
        if self.use_caching:
            y_preds = iter(self.y_preds)
            self.net.infer = lambda *a, **kw: next(y_preds)
        return self.net

    def __exit__(self, *exc):
        if self.use_caching:
            del self.net.__dict__['infer']


class ScoringBase(Callback):
    def __init__(
            self,
            scoring,
            lower_is_better=True,
            on_train=False,
            name=None,
            target_extractor=to_numpy,
            use_caching=True,
    ):
        self.scoring = scoring
        self.lower_is_better = lower_is_better
        self.on_train = on_train
        self.name = name
        self.target_extractor = target_extractor
        self.use_caching = use_caching

    def _get_name(self):
        if self.name is not None:
            return self.name
        if isinstance(self.scoring_, str):
            return self.scoring_
        if isinstance(self.scoring_, partial):
            return self.scoring_.func.__name__
        return self.scoring_.__name__

    def initialize(self):
        self.best_score_ = np.inf if self.lower_is_better else -np.inf
        self.scoring_ = self.scoring
        self.name_ = self._get_name()
        return self

    def _scoring(self, net, X_test, y_test):
        scorer = check_scoring(net, self.scoring_)
        scores = _score(
            estimator=net,
            X_test=X_test,
            y_test=y_test,
            scorer=scorer,
            is_multimetric=False,
        )
        return scores

    def _is_best_score(self, current_score):
        if self.lower_is_better is None:
            return None
        if self.lower_is_better:
            return current_score < self.best_score_
        return current_score > self.best_score_


class BatchScoring(ScoringBase):
    def on_batch_end(self, net, X, y, training, **kwargs):
        if training != self.on_train:
            return

        y_preds = [kwargs['y_pred']]
        with cache_net_infer(net, self.use_caching, y_preds) as cached_net:
            y = self.target_extractor(y)
            try:
                score = self._scoring(cached_net, X, y)
                cached_net.history.record_batch(self.name_, score)
            except KeyError:
                pass

    def get_avg_score(self, history):
        if self.on_train:
            bs_key = 'train_batch_size'
        else:
            bs_key = 'valid_batch_size'

        weights, scores = list(zip(
            *history[-1, 'batches', :, [bs_key, self.name_]]))
        score_avg = np.average(scores, weights=weights)
        return score_avg

    def on_epoch_end(self, net, **kwargs):
        history = net.history
        try:
            history[-1, 'batches', :, self.name_]
        except KeyError:
            return

        score_avg = self.get_avg_score(history)
        is_best = self._is_best_score(score_avg)
        if is_best:
            self.best_score_ = score_avg

        history.record(self.name_, score_avg)
        if is_best is not None:
            history.record(self.name_ + '_best', is_best)


class EpochScoring(ScoringBase):
    def _initialize_cache(self):
        self.y_trues_ = []
        self.y_preds_ = []

    def initialize(self):
        super().initialize()
        self._initialize_cache()
        return self

    def on_epoch_begin(self, net, dataset_train, dataset_valid, **kwargs):
        self._initialize_cache()

        ds = dataset_train if self.on_train else dataset_valid
        self.y_is_placeholder_ = isinstance(ds, Dataset) and ds.y is None

    def on_batch_end(self, net, y, y_pred, training, **kwargs):
        if not self.use_caching or training != self.on_train:
            return

        if not self.y_is_placeholder_:
            self.y_trues_.append(y)
        self.y_preds_.append(y_pred)

    def on_epoch_end(
            self,
            net,
            dataset_train,
            dataset_valid,
            **kwargs):

        dataset = dataset_train if self.on_train else dataset_valid

        if self.use_caching:
            X_test = dataset
            y_pred = self.y_preds_
            y_test = [self.target_extractor(y) for y in self.y_trues_]
            y_test = np.concatenate(y_test) if y_test else None

        if X_test is None:
            return

        with cache_net_infer(net, self.use_caching, y_pred) as cached_net:
            current_score = self._scoring(cached_net, X_test, y_test)

            cached_net.history.record(self.name_, current_score)

            is_best = self._is_best_score(current_score)
            if is_best is None:
                return

            cached_net.history.record(self.name_ + '_best', is_best)
            if is_best:
                self.best_score_ = current_score

    def on_train_end(self, *args, **kwargs):
        self._initialize_cache()


def train_loss_score(net, X=None, y=None):
    return net.history[-1, 'batches', -1, 'train_loss']


def valid_loss_score(net, X=None, y=None):
    return net.history[-1, 'batches', -1, 'valid_loss']


class NeuralNet(object):
    def __init__(
            self,
            module,
            criterion,
            optimizer=torch.optim.SGD,
            lr=0.01,
            max_epochs=10,
            batch_size=128,
            iterator_train=DataLoader,
            iterator_valid=DataLoader,
            dataset=Dataset,
            train_split=CVSplit(5),
            callbacks=None,
            warm_start=False,
            verbose=1,
            device='cpu',
            **kwargs
    ):
        self.module = module
        self.criterion = criterion
        self.optimizer = optimizer
        self.lr = lr
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.iterator_train = iterator_train
        self.iterator_valid = iterator_valid
        self.dataset = dataset
        self.train_split = train_split
        self.callbacks = callbacks
        self.warm_start = warm_start
        self.verbose = verbose
        self.device = device
        vars(self).update(kwargs)

        self.history = None
        self.initialized_ = False

    def get_default_callbacks(self):
        return self._default_callbacks

    def notify(self, method_name, **cb_kwargs):
        getattr(self, method_name)(self, **cb_kwargs)
        for _, cb in self.callbacks_:
            getattr(cb, method_name)(self, **cb_kwargs)

    def on_train_begin(self, net, **kwargs):
        pass

    def on_train_end(self, net, **kwargs):
        pass

    def on_epoch_begin(self, net, **kwargs):
        self.history.new_epoch()
        self.history.record('epoch', len(self.history))

    def on_epoch_end(self, net, **kwargs):
        pass

    def on_batch_begin(self, net, training=False, **kwargs):
        self.history.new_batch()

    def on_batch_end(self, net, **kwargs):
        pass

    def on_grad_computed(self, net, named_parameters, **kwargs):
        pass

    def initialize_callbacks(self):
        callbacks_ = []
        print_logs = []
        for name, cb in self.get_default_callbacks() + (self.callbacks or []):
            cb.initialize()
            if isinstance(cb, PrintLog):
                print_logs.append((name, cb))
            else:
                callbacks_.append((name, cb))
        self.callbacks_ = callbacks_ + print_logs
        return self

    def initialize_criterion(self):
        self.criterion_ = self.criterion()
        return self

    def initialize_module(self):
        module = self.module
        if not isinstance(module, torch.nn.Module):
            module = module()
        self.module_ = module.to(self.device)
        return self

    def initialize_optimizer(self):
        self.optimizer_ = self.optimizer(self.module_.parameters(), lr=self.lr)

    def initialize_history(self):
        self.history = History()

    def initialize(self):
        self.initialize_callbacks()
        self.initialize_criterion()
        self.initialize_module()
        self.initialize_optimizer()
        self.initialize_history()

        self.initialized_ = True
        return self

    def check_data(self, X, y=None):
        pass

    def validation_step(self, Xi, yi, **fit_params):
        self.module_.eval()
        y_pred = self.infer(Xi, **fit_params)
        loss = self.get_loss(y_pred, yi, X=Xi, training=False)
        return {
            'loss': loss,
            'y_pred': y_pred,
            }

    def train_step(self, Xi, yi, **fit_params):
        self.module_.train()
        self.optimizer_.zero_grad()
        y_pred = self.infer(Xi, **fit_params)
        loss = self.get_loss(y_pred, yi, X=Xi, training=True)
        loss.backward()

        self.notify(
            'on_grad_computed',
            named_parameters=list(self.module_.named_parameters())
        )

        self.optimizer_.step()
        return {
            'loss': loss,
            'y_pred': y_pred,
            }

    def evaluation_step(self, Xi, training=False):
        self.module_.train(training)
        return self.infer(Xi)

    def fit_loop(self, X, y=None, epochs=None, **fit_params):
        self.check_data(X, y)
        epochs = epochs if epochs is not None else self.max_epochs

        dataset_train, dataset_valid = self.get_split_datasets(
            X, y, **fit_params)
        on_epoch_kwargs = {
            'dataset_train': dataset_train,
            'dataset_valid': dataset_valid,
        }

        for _ in range(epochs):
            self.notify('on_epoch_begin', **on_epoch_kwargs)

            for Xi, yi in self.get_iterator(dataset_train, training=True):
                self.notify('on_batch_begin', X=Xi, y=yi, training=True)
                step = self.train_step(Xi, yi, **fit_params)
                self.history.record_batch(
                    'train_loss', step['loss'].data.item())
                self.history.record_batch('train_batch_size', get_len(Xi))
                self.notify('on_batch_end', X=Xi, y=yi, training=True, **step)

            if dataset_valid is None:
                self.notify('on_epoch_end', **on_epoch_kwargs)
                continue

            for Xi, yi in self.get_iterator(dataset_valid, training=False):
                self.notify('on_batch_begin', X=Xi, y=yi, training=False)
                step = self.validation_step(Xi, yi, **fit_params)
                self.history.record_batch(
                    'valid_loss', step['loss'].data.item())
                self.history.record_batch('valid_batch_size', get_len(Xi))
                self.notify('on_batch_end', X=Xi, y=yi, training=False, **step)

            self.notify('on_epoch_end', **on_epoch_kwargs)
        return self

    def partial_fit(self, X, y=None, classes=None, **fit_params):
        if not self.initialized_:
            self.initialize()

        self.notify('on_train_begin')
        try:
            self.fit_loop(X, y, **fit_params)
        except KeyboardInterrupt:
            pass
        self.notify('on_train_end')
        return self

    def fit(self, X, y=None, **fit_params):
        if not self.warm_start or not self.initialized_:
            self.initialize()

        self.partial_fit(X, y, **fit_params)
        return self

    def forward_iter(self, X, training=False, device='cpu'):
        dataset = X if is_dataset(X) else self.get_dataset(X)
        iterator = self.get_iterator(dataset, training=training)
        for Xi, _ in iterator:
            yp = self.evaluation_step(Xi, training=training)
            if isinstance(yp, tuple):
                yield tuple(n.to(device) for n in yp)
            else:
                yield yp.to(device)

    def infer(self, x, **fit_params):
        x = to_tensor(x, device=self.device)
        return self.module_(x, **fit_params)

    def predict_proba(self, X):
        y_probas = []
        for yp in self.forward_iter(X, training=False):
            yp = yp[0] if isinstance(yp, tuple) else yp
            y_probas.append(to_numpy(yp))
        y_proba = np.concatenate(y_probas, 0)
        return y_proba

    def get_loss(self, y_pred, y_true, X=None, training=False):
        y_true = to_tensor(y_true, device=self.device)
        return self.criterion_(y_pred, y_true)

    def get_dataset(self, X, y=None):
        if is_dataset(X):
            return X
        return self.dataset(X, y, device=self.device)

    def get_split_datasets(self, X, y=None, **fit_params):
        dataset = self.get_dataset(X, y)
        if self.train_split:
            dataset_train, dataset_valid = self.train_split(
                dataset, y, **fit_params)
        else:
            dataset_train, dataset_valid = dataset, None
        return dataset_train, dataset_valid

    def get_iterator(self, dataset, training=False):
        if training:
            return self.iterator_train(dataset, batch_size=self.batch_size, shuffle=True)
        return self.iterator_valid(dataset, batch_size=self.batch_size, shuffle=False)


class NeuralNetClassifier(NeuralNet):
    def __init__(
            self,
            module,
            criterion=torch.nn.NLLLoss,
            train_split=CVSplit(5, stratified=True),
            *args,
            **kwargs
    ):
        super(NeuralNetClassifier, self).__init__(
            module,
            criterion=criterion,
            train_split=train_split,
            *args,
            **kwargs
        )

    @property
    def _default_callbacks(self):
        return [
            ('epoch_timer', EpochTimer()),
            ('train_loss', BatchScoring(
                train_loss_score,
                name='train_loss',
                on_train=True,
            )),
            ('valid_loss', BatchScoring(
                valid_loss_score,
                name='valid_loss',
            )),
            ('valid_acc', EpochScoring(
                'accuracy',
                name='valid_acc',
                lower_is_better=False,
            )),
            ('print_log', PrintLog()),
        ]

    def get_loss(self, y_pred, y_true, *args, **kwargs):
        if isinstance(self.criterion_, torch.nn.NLLLoss):
            y_pred = torch.log(y_pred)
        return super().get_loss(y_pred, y_true, *args, **kwargs)

    def predict(self, X):
        y_preds = []
        for yp in self.forward_iter(X, training=False):
            yp = yp[0] if isinstance(yp, tuple) else yp
            y_preds.append(to_numpy(yp.max(-1)[-1]))
        y_pred = np.concatenate(y_preds, 0)
        return y_pred


class PointNet(nn.Module):
    def __init__(self, k=4):
        super(PointNet, self).__init__()
        self.conv1 = nn.Conv1d(3, 64, 1)
        self.conv2 = nn.Conv1d(64, 128, 1)
        self.conv3 = nn.Conv1d(128, 256, 1)
        self.bn1 = nn.BatchNorm1d(64)
        self.bn2 = nn.BatchNorm1d(128)
        self.bn3 = nn.BatchNorm1d(256)
        self.fc1 = nn.Linear(256, 128)
        self.fc2 = nn.Linear(128, k)
        self.bn4 = nn.BatchNorm1d(128)
        self.dropout = nn.Dropout(p=0.3)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = self.bn3(self.conv3(x))
        x = torch.max(x, 2, keepdim=True)[0]
        x = x.view(-1, 256)
        x = F.relu(self.bn4(self.dropout(self.fc1(x))))
        x = self.fc2(x)
        return F.softmax(x, dim=1)


torch.manual_seed(0)
rng = np.random.RandomState(0)
X = rng.randn(640, 3, 256).astype(np.float32)
y = rng.randint(0, 4, 640).astype(np.int64)

net = NeuralNetClassifier(
    PointNet,
    max_epochs=3,
    lr=0.01,
    batch_size=8,
    device='cpu',
)

net.fit(X, y)
