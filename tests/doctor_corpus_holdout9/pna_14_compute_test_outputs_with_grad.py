# Source: https://github.com/lukecavabarrett/pna/pull/14
#   code: execute_train() with its train() and compute_test() closures
#   (multitask_benchmark/util/train.py) and get_loss, total_loss, total_loss_multiple_batches,
#   specific_loss and specific_loss_multiple_batches (multitask_benchmark/util/util.py) at
#   95cd573^, before the pull request wrapped compute_test() in torch.no_grad(): every set's
#   outputs are collected in output_zip for all its batches before the losses are computed
# Adapted: the PNA GNN (models/pytorch/gnn_framework.py) replaced by a small dense
#   message-passing network with the same call (features [B, N, F], adj [B, N, N]) -> (node
#   outputs, graph outputs); the multitask dataset by random graphs (train 12, val 4, test 30
#   batches of 16 graphs of 48 nodes, 3 node and 3 graph targets); 5 epochs, patience 1000;
#   the best model kept in memory instead of '{epoch}.pkl' files; tqdm, CUDA moves and the
#   avg_d / variable-layers options dropped; cpu, seeded.
import copy
import sys
import time
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn.functional as F
import torch.optim as optim


def get_loss(loss, output, target):
    if loss == "mse":
        return F.mse_loss(output, target)


def total_loss(output, target, loss='mse', only_nodes=False, only_graph=False):
    nodes_loss = get_loss(loss, output[0], target[0])
    graph_loss = get_loss(loss, output[1], target[1])
    weighted_average = (nodes_loss * output[0].shape[-1] + graph_loss * output[1].shape[-1]) / (
            output[0].shape[-1] + output[1].shape[-1])
    return weighted_average


def total_loss_multiple_batches(output, target, loss='mse', only_nodes=False, only_graph=False):
    n_batches = len(output[0])
    return sum([total_loss((output[0][batch], output[1][batch]), (target[0][batch], target[1][batch]),
                           loss, only_nodes, only_graph).data.item()
                for batch in range(n_batches)]) / n_batches


def specific_loss(output, target, loss='mse', only_nodes=False, only_graph=False):
    n_nodes_labels = output[0].shape[-1]
    n_graph_labels = output[1].shape[-1]
    nodes_loss = [get_loss(loss, output[0][:, :, k], target[0][:, :, k]).item() for k in range(n_nodes_labels)]
    graph_loss = [get_loss(loss, output[1][:, k], target[1][:, k]).item() for k in range(n_graph_labels)]
    return nodes_loss + graph_loss


def specific_loss_multiple_batches(output, target, loss='mse', only_nodes=False, only_graph=False):
    n_batches = len(output[0])
    classes = output[0][0].shape[-1] + output[1][0].shape[-1]
    sum_losses = [0] * classes
    for batch in range(n_batches):
        spec_loss = specific_loss((output[0][batch], output[1][batch]), (target[0][batch], target[1][batch]), loss,
                                  only_nodes, only_graph)
        for par in range(classes):
            sum_losses[par] += spec_loss[par]
    return [sum_loss / n_batches for sum_loss in sum_losses]


class GNN(torch.nn.Module):
    def __init__(self, nfeat, hidden, nodes_out, graph_out, conv_layers, **kwargs):
        super().__init__()
        self.inp = torch.nn.Linear(nfeat, hidden)
        self.convs = torch.nn.ModuleList([torch.nn.Linear(2 * hidden, hidden) for _ in range(conv_layers)])
        self.nodes_fc = torch.nn.Linear(hidden, nodes_out)
        self.graph_fc = torch.nn.Linear(hidden, graph_out)

    def forward(self, x, adj):
        h = F.leaky_relu(self.inp(x))
        for conv in self.convs:
            h = F.leaky_relu(conv(torch.cat([h, torch.bmm(adj, h)], dim=-1)))
        return self.nodes_fc(h), self.graph_fc(h.mean(1))


def load_dataset(sizes, n=48, nfeat=8):
    def split(k):
        adj = [(torch.rand(16, n, n) < 0.1).float() for _ in range(k)]
        return (adj, [torch.randn(16, n, nfeat) for _ in range(k)], [torch.randn(16, n, 3) for _ in range(k)],
                [torch.randn(16, 3) for _ in range(k)])
    parts = {name: split(k) for name, k in sizes.items()}
    return tuple({name: parts[name][i] for name in parts} for i in range(4))


def execute_train(gnn_args, args):
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    adj, features, node_labels, graph_labels = load_dataset({'train': 12, 'val': 4, 'test': 30})
    gnn_args = SimpleNamespace(**gnn_args)
    gnn_args.nfeat = features['train'][0].shape[2]
    gnn_args.nodes_out = node_labels['train'][0].shape[-1]
    gnn_args.graph_out = graph_labels['train'][0].shape[-1]
    model = GNN(**vars(gnn_args))
    optimizer = optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)

    def train(epoch):
        model.train()
        for batch in range(len(adj['train'])):
            optimizer.zero_grad()
            output = model(features['train'][batch], adj['train'][batch])
            loss_train = total_loss(output, (node_labels['train'][batch], graph_labels['train'][batch]), loss=args.loss)
            loss_train.backward()
            optimizer.step()

        model.eval()
        output_zip = [model(features['val'][batch], adj['val'][batch]) for batch in range(len(adj['val']))]
        output = ([x[0] for x in output_zip], [x[1] for x in output_zip])
        loss_val = total_loss_multiple_batches(output, (node_labels['val'], graph_labels['val']), loss=args.loss)
        return loss_train.data.item(), loss_val

    def compute_test():
        model.eval()
        sets = list(features.keys())
        for dset in sets:
            output_zip = [model(features[dset][batch], adj[dset][batch]) for batch in range(len(adj[dset]))]
            output = ([x[0] for x in output_zip], [x[1] for x in output_zip])
            loss_test = total_loss_multiple_batches(output, (node_labels[dset], graph_labels[dset]), loss=args.loss)
            print("Test set results ", dset, ": loss= {:.4f}".format(loss_test))
            print(dset, ": ", specific_loss_multiple_batches(output, (node_labels[dset], graph_labels[dset]),
                                                               loss=args.loss))
            del output_zip
            del output
            del loss_test
            del features[dset]
            del adj[dset]
            del node_labels[dset]
            del graph_labels[dset]

    sys.stdout.flush()
    t_total = time.time()
    loss_values = []
    best = args.epochs + 1
    best_epoch, best_state = -1, None
    for epoch in range(args.epochs):
        loss_train, loss_val = train(epoch)
        loss_values.append(loss_val)
        print('epoch {} loss.train: {:.4f}, loss.val: {:.4f}'.format(epoch, loss_train, loss_val))
        if loss_values[-1] < best:
            best_state = copy.deepcopy(model.state_dict())
            best = loss_values[-1]
            best_epoch = epoch
    print("Optimization Finished!")
    print("Total time elapsed: {:.4f}s".format(time.time() - t_total))
    print('Loading {}th epoch'.format(best_epoch + 1))
    model.load_state_dict(best_state)

    # Testing
    compute_test()


args = SimpleNamespace(seed=42, epochs=5, lr=0.003, weight_decay=1e-6, loss='mse', patience=1000)
execute_train(dict(hidden=64, conv_layers=4), args)
