# Source: https://github.com/chemprop/chemprop/issues/32
#   code: chemprop/data/data.py (MoleculeDataset.batch_graph, SMILES_TO_GRAPH) and
#   chemprop/features/featurization.py (MolGraph, BatchMolGraph) of chemprop 0.x, and the
#   batched prediction loop of chemprop/train/predict.py
# Adapted: RDKit parsing replaced by a character-level featurization of the SMILES string
#   (one atom per letter, a bond between consecutive atoms), the MPN encoder reduced to a
#   depth-3 directed message passing network of hidden size 64, 40 batches of 50 random
#   SMILES-like strings, cpu, seeded.
import random
from typing import List

import numpy as np
import torch
import torch.nn as nn

ATOM_FDIM = 16
BOND_FDIM = ATOM_FDIM + 4

# Cache of graph featurizations
SMILES_TO_GRAPH = {}


def atom_features(symbol: str) -> List[float]:
    features = [0.0] * ATOM_FDIM
    features[ord(symbol) % ATOM_FDIM] = 1.0
    return features


class MolGraph:
    def __init__(self, smiles: str):
        self.smiles = smiles
        self.n_atoms = 0
        self.n_bonds = 0
        self.f_atoms = []
        self.f_bonds = []
        self.a2b = []
        self.b2a = []
        self.b2revb = []

        atoms = [c for c in smiles if c.isalpha()]
        self.f_atoms = [atom_features(a) for a in atoms]
        self.n_atoms = len(self.f_atoms)
        for _ in range(self.n_atoms):
            self.a2b.append([])
        for a1 in range(self.n_atoms - 1):
            a2 = a1 + 1
            f_bond = [1.0, 0.0, 0.0, 0.0]
            self.f_bonds.append(self.f_atoms[a1] + f_bond)
            self.f_bonds.append(self.f_atoms[a2] + f_bond)
            b1 = self.n_bonds
            b2 = b1 + 1
            self.a2b[a2].append(b1)
            self.b2a.append(a1)
            self.a2b[a1].append(b2)
            self.b2a.append(a2)
            self.b2revb.append(b2)
            self.b2revb.append(b1)
            self.n_bonds += 2


class BatchMolGraph:
    def __init__(self, mol_graphs: List[MolGraph]):
        self.n_atoms = 1
        self.n_bonds = 1
        self.a_scope = []
        f_atoms = [[0] * ATOM_FDIM]
        f_bonds = [[0] * BOND_FDIM]
        a2b = [[]]
        b2a = [0]
        b2revb = [0]
        for mol_graph in mol_graphs:
            f_atoms.extend(mol_graph.f_atoms)
            f_bonds.extend(mol_graph.f_bonds)
            for a in range(mol_graph.n_atoms):
                a2b.append([b + self.n_bonds for b in mol_graph.a2b[a]])
            for b in range(mol_graph.n_bonds):
                b2a.append(self.n_atoms + mol_graph.b2a[b])
                b2revb.append(self.n_bonds + mol_graph.b2revb[b])
            self.a_scope.append((self.n_atoms, mol_graph.n_atoms))
            self.n_atoms += mol_graph.n_atoms
            self.n_bonds += mol_graph.n_bonds
        self.max_num_bonds = max(1, max(len(in_bonds) for in_bonds in a2b))
        self.f_atoms = torch.FloatTensor(f_atoms)
        self.f_bonds = torch.FloatTensor(f_bonds)
        self.a2b = torch.LongTensor([a2b[a] + [0] * (self.max_num_bonds - len(a2b[a])) for a in range(self.n_atoms)])
        self.b2a = torch.LongTensor(b2a)
        self.b2revb = torch.LongTensor(b2revb)

    def get_components(self):
        return self.f_atoms, self.f_bonds, self.a2b, self.b2a, self.b2revb, self.a_scope


class MoleculeDatapoint:
    def __init__(self, smiles: List[str]):
        self.smiles = smiles
        self.mol = [None for _ in smiles]


class MoleculeDataset:
    def __init__(self, data: List[MoleculeDatapoint]):
        self._data = data
        self._batch_graph = None

    def batch_graph(self) -> List[BatchMolGraph]:
        if self._batch_graph is None:
            self._batch_graph = []

            mol_graphs = []
            for d in self._data:
                mol_graphs_list = []
                for s, m in zip(d.smiles, d.mol):
                    if s in SMILES_TO_GRAPH:
                        mol_graph = SMILES_TO_GRAPH[s]
                    else:
                        mol_graph = MolGraph(s)
                        SMILES_TO_GRAPH[s] = mol_graph
                    mol_graphs_list.append(mol_graph)
                mol_graphs.append(mol_graphs_list)

            self._batch_graph = [BatchMolGraph([g[i] for g in mol_graphs]) for i in range(len(mol_graphs[0]))]

        return self._batch_graph


def index_select_ND(source, index):
    index_size = index.size()
    suffix_dim = source.size()[1:]
    final_size = index_size + suffix_dim
    target = source.index_select(dim=0, index=index.view(-1))
    return target.view(final_size)


class MPNEncoder(nn.Module):
    def __init__(self, hidden_size=64, depth=3):
        super().__init__()
        self.depth = depth
        self.W_i = nn.Linear(BOND_FDIM, hidden_size, bias=False)
        self.W_h = nn.Linear(hidden_size, hidden_size, bias=False)
        self.W_o = nn.Linear(ATOM_FDIM + hidden_size, hidden_size)
        self.act_func = nn.ReLU()

    def forward(self, mol_graph: BatchMolGraph):
        f_atoms, f_bonds, a2b, b2a, b2revb, a_scope = mol_graph.get_components()
        input = self.W_i(f_bonds)
        message = self.act_func(input)
        for depth in range(self.depth - 1):
            nei_a_message = index_select_ND(message, a2b)
            a_message = nei_a_message.sum(dim=1)
            rev_message = message[b2revb]
            message = a_message[b2a] - rev_message
            message = self.W_h(message)
            message = self.act_func(input + message)
        nei_a_message = index_select_ND(message, a2b)
        a_message = nei_a_message.sum(dim=1)
        a_input = torch.cat([f_atoms, a_message], dim=1)
        atom_hiddens = self.act_func(self.W_o(a_input))
        mol_vecs = []
        for i, (a_start, a_size) in enumerate(a_scope):
            cur_hiddens = atom_hiddens.narrow(0, a_start, a_size)
            mol_vecs.append(cur_hiddens.sum(dim=0) / a_size)
        return torch.stack(mol_vecs, dim=0)


class MoleculeModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = MPNEncoder()
        self.ffn = nn.Sequential(nn.Dropout(0.0), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, batch):
        return self.ffn(self.encoder(batch[0]))


def random_smiles(rng):
    return ''.join(rng.choice('CCCNOSFcnol') for _ in range(rng.randint(20, 60)))


def predict(model, data_loader):
    model.eval()
    preds = []
    for batch in data_loader:
        mol_batch = batch.batch_graph()
        with torch.no_grad():
            batch_preds = model(mol_batch)
        batch_preds = batch_preds.data.cpu().numpy()
        preds.extend(batch_preds.tolist())
    return preds


def screening_batches(rng, num_batches, batch_size):
    for _ in range(num_batches):
        yield MoleculeDataset([MoleculeDatapoint([random_smiles(rng)]) for _ in range(batch_size)])


if __name__ == '__main__':
    rng = random.Random(0)
    torch.manual_seed(0)
    model = MoleculeModel()
    preds = predict(model, screening_batches(rng, 40, 50))
    print(len(preds), 'predictions, mean', float(np.mean(preds)))
