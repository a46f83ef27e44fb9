# Source: https://github.com/metatensor/metatrain/commit/34e51a157bd3f1b3a605438d0a62c7b34b134cc9
#   code: src/metatrain/cli/eval.py (_eval_targets), src/metatrain/utils/evaluate_model.py and
#         src/metatrain/utils/data/writers/metatensor.py (MetatensorWriter) at the parent of 34e51a15
# Adapted: metatensor's TensorMap/TensorBlock and metatomic's System are reduced to small classes with the
# attributes used here; the exported model is a per-atom MLP on radial features with the same
# model(systems, outputs) call; evaluate_model keeps only the energy path without gradients (no forces
# requested), the metric accumulators keep their .item() sums; timing, neighbour lists and mts.save are
# left out; 80 batches of 4 random structures of 48 atoms are evaluated on CPU (no training).
from typing import Dict, List

import torch


class System:
    def __init__(self, positions, types):
        self.positions, self.types = positions, types

    def __len__(self):
        return len(self.types)


class TensorBlock:
    def __init__(self, values):
        self.values = values


class TensorMap:
    def __init__(self, blocks):
        self.blocks = blocks

    def block(self):
        return self.blocks[0]


class ModelOutput:
    def __init__(self, quantity="energy", unit="eV", per_atom=False):
        self.quantity, self.unit, self.per_atom = quantity, unit, per_atom


class SoapBpnn(torch.nn.Module):
    def __init__(self, n_radial=32, hidden=256):
        super().__init__()
        self.centers = torch.linspace(0.5, 6.0, n_radial)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(n_radial, hidden), torch.nn.SiLU(),
                                       torch.nn.Linear(hidden, hidden), torch.nn.SiLU(), torch.nn.Linear(hidden, 1))

    def forward(self, systems: List[System], outputs: Dict[str, ModelOutput]) -> Dict[str, TensorMap]:
        energies = []
        for system in systems:
            d = torch.cdist(system.positions, system.positions)
            features = torch.exp(-(d.unsqueeze(-1) - self.centers) ** 2).sum(dim=1)
            energies.append(self.mlp(features).sum())
        return {"energy": TensorMap([TensorBlock(torch.stack(energies).unsqueeze(-1))])}


def evaluate_model(model, systems, targets, is_training, check_consistency=False):
    outputs = {key: ModelOutput(per_atom=False) for key in targets}
    model_outputs = model(systems, outputs)
    return model_outputs


class RMSEAccumulator:
    def __init__(self):
        self.information = {}

    def update(self, predictions, targets):
        for key, target in targets.items():
            prediction_block, target_block = predictions[key].block(), target.block()
            if key not in self.information:
                self.information[key] = (0.0, 0)
            self.information[key] = (
                self.information[key][0] + ((prediction_block.values - target_block.values) ** 2).sum().item(),
                self.information[key][1] + prediction_block.values.numel(),
            )

    def finalize(self):
        return {f"{k} RMSE": (v[0] / v[1]) ** 0.5 for k, v in self.information.items()}


class MetatensorWriter:
    def __init__(self, filename, capabilities=None, append=False):
        self.filename = filename
        self._systems: List[System] = []
        self._preds: List[Dict[str, TensorMap]] = []

    def write(self, systems: List[System], predictions: Dict[str, TensorMap]):
        self._systems.extend(systems)
        self._preds.append(predictions)

    def finish(self):
        energies = torch.cat([p["energy"].block().values for p in self._preds])
        print(self.filename, "energies", tuple(energies.shape))


def _eval_targets(model, dataloader, options, writer=None):
    rmse_acc = RMSEAccumulator()
    for batch in dataloader:
        systems, batch_targets = batch
        batch_predictions = evaluate_model(model, systems, options, is_training=False)
        rmse_acc.update(batch_predictions, batch_targets)
        if writer:
            writer.write(systems, batch_predictions)
    if writer:
        writer.finish()
    print(rmse_acc.finalize())


def make_batch(n_structures=4, n_atoms=48):
    systems = [System(torch.rand(n_atoms, 3) * 8.0, torch.randint(1, 9, (n_atoms,))) for _ in range(n_structures)]
    targets = {"energy": TensorMap([TensorBlock(torch.randn(n_structures, 1))])}
    return systems, targets


model = SoapBpnn().eval()
dataloader = [make_batch() for _ in range(80)]
writer = MetatensorWriter("output.mts")
_eval_targets(model, dataloader, {"energy": None}, writer=writer)
