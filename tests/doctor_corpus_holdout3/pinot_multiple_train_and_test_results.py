# Source: https://github.com/choderalab/pinot/issues/23
#   code: pinot/app/experiment.py (Train, Test, TrainAndTest, MultipleTrainAndTest),
#   pinot/metrics.py and pinot/net.py (Net) at the commit before
#   https://github.com/choderalab/pinot/commit/9b3d67ccbcc2690e4aa16b94c986223aae7df9eb
# Adapted: DGL graphs replaced by fixed-size molecular fingerprints (dgl.unbatch/dgl.batch ->
#   list/torch.stack; dgl and matplotlib are not installed), the graph representation by an
#   MLP, the data sets by random fingerprints with a linear target (6 training batches of 32,
#   4 test batches of 32), 3 experiments of 8 epochs (learning rates 1e-3, 3e-4, 1e-4) run by
#   MultipleTrainAndTest, cpu, seeded.
import copy

import torch


def _rmse(y, y_hat):
    return torch.sqrt(torch.nn.functional.mse_loss(y, y_hat))


def rmse(net, g, y):
    y_hat = net.expectation(g)
    return _rmse(y, y_hat)


def _r2(y, y_hat):
    ss_tot = (y - y.mean()).pow(2).sum()
    ss_res = (y_hat - y).pow(2).sum()
    return 1 - torch.div(ss_res, ss_tot)


def r2(net, g, y):
    y_hat = net.expectation(g)
    return _r2(y, y_hat)


def avg_nll(net, g, y):
    return net.loss(g, y).mean()


class Net(torch.nn.Module):
    def __init__(
        self,
        representation,
        parameterization,
        distribution_class=torch.distributions.normal.Normal,
        param_transform=lambda x, y: (x, torch.exp(y) + 1e-5),
        expectation_fn=lambda x, y: x,
    ):
        super(Net, self).__init__()
        self.representation = representation
        self.parametrization = parameterization
        self.distribution_class = distribution_class
        self.param_transform = param_transform
        self.expectation_fn = expectation_fn

    def forward(self, g):
        h = self.representation(g)
        theta = self.parametrization(h)
        return theta

    def condition(self, g):
        theta = self.forward(g)
        distribution = self.distribution_class(
            *self.param_transform(*torch.unbind(theta, dim=-1))
        )
        return distribution

    def loss(self, g, y):
        distribution = self.condition(g)
        return -distribution.log_prob(y)

    def expectation(self, g):
        theta = self.forward(g)
        return self.expectation_fn(*torch.unbind(theta, dim=-1))


class Train:
    def __init__(self, net, data, optimizer, n_epochs=100, record_interval=1):

        self.data = data
        self.optimizer = optimizer
        self.n_epochs = n_epochs
        self.net = net
        self.record_interval = record_interval
        self.states = {}

    def train_once(self):
        for g, y in self.data:

            def l():
                loss = torch.sum(self.net.loss(g, y))
                self.optimizer.zero_grad()
                loss.backward()
                return loss

            self.optimizer.step(l)

    def train(self):
        for epoch_idx in range(self.n_epochs):
            self.train_once()

            if epoch_idx % self.record_interval == 0:
                self.states[epoch_idx] = copy.deepcopy(self.net.state_dict())

        self.states["final"] = self.net.state_dict()

        return self.net


class Test:
    def __init__(self, net, data, states, metrics=[rmse, r2]):
        self.net = copy.deepcopy(net)  # deepcopy the model object
        self.data = data
        self.metrics = metrics
        self.states = states

    def test(self):
        # initialize an empty dict for each metrics
        results = {}

        for metric in self.metrics:
            results[metric.__name__] = {}

        for state_name, state in self.states.items():  # loop through states
            self.net.load_state_dict(state)

            # concat y and y_hat in test set
            y = []
            g = []
            for g_, y_ in self.data:
                y.append(y_)
                g += list(g_)

            if y[0].dim() == 0:
                y = torch.stack(y)
            else:
                y = torch.cat(y)

            g = torch.stack(g)

            for metric in self.metrics:  # loop through the metrics
                results[metric.__name__][state_name] = metric(self.net, g, y)

        self.results = results
        return self.results


class TrainAndTest:
    def __init__(
        self,
        net,
        data_tr,
        data_te,
        optimizer,
        metrics=[rmse, r2, avg_nll],
        n_epochs=100,
        record_interval=1,
    ):
        self.net = net  # deepcopy the model object
        self.data_tr = data_tr
        self.data_te = data_te
        self.metrics = metrics
        self.optimizer = optimizer
        self.n_epochs = n_epochs
        self.record_interval = record_interval

    def run(self):
        train = Train(
            net=self.net,
            data=self.data_tr,
            optimizer=self.optimizer,
            n_epochs=self.n_epochs,
        )

        train.train()

        self.states = train.states

        test = Test(
            net=self.net, data=self.data_te, metrics=self.metrics, states=self.states
        )

        test.test()

        self.results_te = test.results

        test = Test(
            net=self.net, data=self.data_tr, metrics=self.metrics, states=self.states
        )

        test.test()

        self.results_tr = test.results

        return {'test': self.results_te, 'training': self.results_tr}


class MultipleTrainAndTest:
    def __init__(self, experiment_generating_fn, param_dicts):
        self.experiment_generating_fn = experiment_generating_fn
        self.param_dicts = param_dicts

    def run(self):
        results = []

        for param_dict in self.param_dicts:
            train_and_test = self.experiment_generating_fn(param_dict)
            result = train_and_test.run()
            results.append((param_dict, result))
            del train_and_test

        self.results = results

        return self.results


def make_data(n_batches, batch_size, w, generator):
    data = []
    for _ in range(n_batches):
        g = (torch.rand(batch_size, 512, generator=generator) < 0.1).float()
        data.append((g, g @ w + 0.1 * torch.randn(batch_size, generator=generator)))
    return data


if __name__ == '__main__':
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    w = torch.randn(512, generator=generator) * 0.1
    data_tr = make_data(6, 32, w, generator)
    data_te = make_data(4, 32, w, generator)

    def experiment_generating_fn(param_dict):
        representation = torch.nn.Sequential(torch.nn.Linear(512, 256), torch.nn.Tanh(),
                                             torch.nn.Linear(256, 256), torch.nn.Tanh())
        net = Net(representation, torch.nn.Linear(256, 2))
        optimizer = torch.optim.Adam(net.parameters(), param_dict['lr'])
        return TrainAndTest(net, data_tr, data_te, optimizer, n_epochs=param_dict['n_epochs'])

    multiple = MultipleTrainAndTest(experiment_generating_fn,
                                    [{'lr': lr, 'n_epochs': 8} for lr in (1e-3, 3e-4, 1e-4)])
    for param_dict, result in multiple.run():
        print(param_dict, 'test rmse', result['test']['rmse']['final'].item())
