# Source: https://github.com/keras-team/keras/issues/23110
#   code: keras/src/tree/torchtree_impl.py (_dict_to_ordered_dict, traverse) before the fix of
#   https://github.com/keras-team/keras/pull/23111, and the sliding-window loop over
#   model.predict_on_batch
# Adapted: keras is not installed: the torch backend's predict_on_batch is reduced to a
#   stand-in that runs a small torch model under no_grad and passes its inputs and outputs
#   through keras.tree (map_structure via traverse and _dict_to_ordered_dict, kept as they
#   were before the fix); CPU instead of CUDA; a 3-D volume of 48 patches of 2x1x32x32x32,
#   random data; output written into a numpy volume as in the issue.
from collections import defaultdict

import numpy as np
import torch
import torch.nn as nn
from torch.utils import _pytree as torch_tree


def _tree_is_leaf(tree, is_leaf=None):
    if is_leaf is not None and is_leaf(tree):
        return True
    return torch_tree._get_node_type(tree) not in torch_tree.SUPPORTED_NODES


def _dict_to_ordered_dict(structure):
    def func(x):
        if type(x) is dict:
            return {k: x[k] for k in sorted(x.keys())}
        elif type(x) is defaultdict:
            return defaultdict(x.default_factory, {k: x[k] for k in sorted(x.keys())})
        return None

    def traverse_children():
        children, treedef = torch_tree.tree_flatten(
            structure,
            is_leaf=lambda x: x is not structure,
        )
        if treedef.num_nodes == 1 and treedef.num_leaves == 1:
            return structure
        else:
            return torch_tree.tree_unflatten(
                [_dict_to_ordered_dict(c) for c in children],
                treedef,
            )

    ret = func(structure)
    if ret is None:
        return traverse_children()
    return ret


def traverse(func, structure, top_down=True):
    def traverse_children():
        children, treedef = torch_tree.tree_flatten(
            structure,
            is_leaf=lambda x: x is not structure,
        )
        if treedef.num_nodes == 1 and treedef.num_leaves == 1:
            return structure
        else:
            return torch_tree.tree_unflatten(
                [traverse(func, c, top_down=top_down) for c in children],
                treedef,
            )

    structure = _dict_to_ordered_dict(structure)
    if top_down:
        ret = func(structure)
        if ret is None:
            return traverse_children()
    else:
        traversed_structure = traverse_children()
        ret = func(traversed_structure)
        if ret is None:
            return traversed_structure
    return ret


def convert_to_numpy(x):
    return traverse(lambda t: t.cpu().numpy() if isinstance(t, torch.Tensor) else None, x)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv3d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv3d(8, 2, 3, padding=1))

    def predict_on_batch(self, x):
        data = traverse(lambda t: torch.as_tensor(t) if isinstance(t, np.ndarray) else None, {"x": x})
        with torch.no_grad():
            outputs = {"seg": self.body(data["x"]).softmax(1)}
        return convert_to_numpy(outputs)["seg"]


def extract_patches(volume, size=32):
    for z in range(0, volume.shape[2], size):
        for y in range(0, volume.shape[3], size):
            for x in range(0, volume.shape[4], size):
                yield (slice(None), slice(None), slice(z, z + size), slice(y, y + size), slice(x, x + size))


torch.manual_seed(0)
model = Model().eval()
volume = np.random.rand(2, 1, 96, 128, 128).astype(np.float32)
output_volume = np.zeros((2, 2, 96, 128, 128), dtype=np.float32)
for coords in extract_patches(volume):
    patch = volume[coords]
    pred = model.predict_on_batch(patch)
    output_volume[coords] = pred
print("mean foreground", float(output_volume[:, 1].mean()))
