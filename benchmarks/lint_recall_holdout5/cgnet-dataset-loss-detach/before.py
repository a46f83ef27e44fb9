# Source: https://github.com/coarse-graining/cgnet/blob/0f09f60ce9a4c65c69297db2a6b92649daac1d64/cgnet/network/utils.py
# Adapted excerpt, before the fix https://github.com/coarse-graining/cgnet/commit/cfb43033f3ef6b7ae87dd30e7a9bf630f64437c3
# (trimmed to the code the fix touches; omitted lines are marked).
# Authors: Nick Charron, Brooke Husic, Jiang Wang
# Contributors: Dominik Lemm

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset
import numpy as np

from cgnet.feature import GeometryFeature, SchnetFeature


# ... (lines 12-74 omitted)
def dataset_loss(model, loader):
    """Compute average loss over arbitrary loader/dataset

    Parameters
    ----------
    model : cgnet.network.CGNet() instance
        model to calculate loss
    loader : torch.utils.data.DataLoader() instance
        loader (with associated dataset)

    Returns
    -------
    loss : float
        loss computed over the entire dataset. If the last batch consists of a
        smaller set of left over examples, its contribution to the loss is
        weighted by the ratio of number elements in the MSE matrix to that of
        the normal number of elements assocatied with the loader's batch size
        before summation to a scalar.

    Example
    -------
    test_set = MoleculeDataset(coords[test_indices], forces[test_indices])
    test_sampler = torch.utils.data.RandomSubSetSampler(test_indices)
    test_loader = torch.utils.data.DataLoader(test_set, sampler=test_sampler,
                                              batch_size=512)
    test_error = dataset_loss(MyModel, test_loader)

    """
    loss = 0
    num_batch = 0
    ref_numel = 0
    for num, batch in enumerate(loader):
        coords, force, _ = batch
        if num == 0:
            ref_numel = coords.numel()
        potential, pred_force = model.forward(coords)
        loss += model.criterion(pred_force,
                                force) * (coords.numel() / ref_numel)
        num_batch += (coords.numel() / ref_numel)
    loss /= num_batch
    return loss.data.item()

# ... (lines 117-377 omitted)
