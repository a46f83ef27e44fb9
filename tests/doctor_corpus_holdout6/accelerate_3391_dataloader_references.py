# Source: https://github.com/huggingface/accelerate/pull/3391
# Adapted: GradientState (its shared state, _add_dataloader/_remove_dataloader),
#   DataLoaderStateMixin.begin/end and DataLoaderShard.__iter__ of accelerate as of the pull
#   request (1b6905e), trimmed to the single-process cpu path (no RNG synchronisation,
#   device placement or state dict); the pull request's reproduction trains five
#   SentenceTransformer models in a row, which is written here as five runs of a small
#   regression model, each on its own data set of 2048 x 256 random features wrapped in a
#   DataLoaderShard and stopped at max_steps before the end of the epoch, as trainers do;
#   cpu, seeded.
from contextlib import suppress

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)


class GradientState:
    _shared_state = {}

    def __init__(self):
        self.__dict__ = self._shared_state
        if not self.initialized:
            self.sync_gradients = True
            self.active_dataloader = None
            self.dataloader_references = [None]
            self.plugin_kwargs = {}

    @property
    def initialized(self) -> bool:
        "Returns whether the `GradientState` has been initialized"
        return GradientState._shared_state != {}

    def _add_dataloader(self, dataloader):
        "Private function that adds a dataloader to `self.dataloader_references` and sets `in_dataloader` to `True`. Users should not have to call this."
        self.active_dataloader = dataloader
        self.dataloader_references.append(self.active_dataloader)

    def _remove_dataloader(self, dataloader):
        "Private function that removes a dataloader from `self.dataloader_references` and sets `in_dataloader` to `False` if there are no more dataloaders. Users should not have to call this."
        self.dataloader_references.remove(dataloader)
        self.active_dataloader = self.dataloader_references[-1]

    @property
    def in_dataloader(self) -> bool:
        "Returns whether the current process is in a dataloader"
        return self.active_dataloader is not None


class DataLoaderStateMixin:
    def __init_subclass__(cls, **kwargs):
        cls.end_of_dataloader = False
        cls.remainder = -1

    def reset(self):
        self.end_of_dataloader = False
        self.remainder = -1

    def begin(self):
        "Prepares the gradient state for the current dataloader"
        self.reset()
        with suppress(Exception):
            if not self._drop_last:
                length = getattr(self.dataset, "total_dataset_length", len(self.dataset))
                self.remainder = length % self.total_batch_size
        self.gradient_state._add_dataloader(self)

    def end(self):
        "Cleans up the gradient state after exiting the dataloader"
        self.gradient_state._remove_dataloader(self)


class DataLoaderShard(DataLoader, DataLoaderStateMixin):
    def __init__(self, dataset, skip_batches=0, _drop_last=False, **kwargs):
        super().__init__(dataset, **kwargs)
        self.skip_batches = skip_batches
        self.gradient_state = GradientState()
        self._drop_last = _drop_last
        self.iteration = 0

    @property
    def base_dataloader(self):
        return super()

    @property
    def total_batch_size(self):
        return self.batch_size

    def __iter__(self):
        self.begin()

        dataloader_iter = self.base_dataloader.__iter__()
        # We iterate one batch ahead to check when we are at the end
        try:
            current_batch = next(dataloader_iter)
        except StopIteration:
            yield

        batch_index = 0
        while True:
            try:
                next_batch = next(dataloader_iter)
                if batch_index >= self.skip_batches:
                    yield current_batch
                batch_index += 1
                current_batch = next_batch
            except StopIteration:
                self.end_of_dataloader = True
                if batch_index >= self.skip_batches:
                    yield current_batch
                break

        self.iteration += 1
        self.end()


def train_one_model(run, max_steps=20):
    dataset = TensorDataset(torch.randn(2048, 256), torch.randn(2048, 1))
    train_dataloader = DataLoaderShard(dataset, batch_size=32, shuffle=True)
    model = nn.Sequential(nn.Linear(256, 64), nn.ReLU(), nn.Linear(64, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    step = 0
    for features, target in train_dataloader:
        loss = nn.functional.mse_loss(model(features), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        if step >= max_steps:
            break
    print(f"run {run}: loss {loss.item():.4f}")


for it in range(5):
    train_one_model(it)
