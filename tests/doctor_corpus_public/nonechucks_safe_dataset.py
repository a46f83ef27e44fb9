# Source: https://github.com/msamogh/nonechucks/issues/13
#   code: nonechucks/dataset.py (SafeDataset) and nonechucks/utils.py (memoize) at commit 69af86f
# Adapted: the two library pieces inlined (SafeDataset trimmed to the methods the loop uses);
#   the reporter's "rapid" variant (torch.empty(10_000) items), 400 items instead of 1_000_000.
import torch, torch.utils.data
from functools import partial


class memoize(object):
    """cache the return value of a method"""

    def __init__(self, func):
        self.func = func

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self.func
        return partial(self, obj)

    def __call__(self, *args, **kw):
        obj = args[0]
        try:
            cache = obj.__cache
        except AttributeError:
            cache = obj.__cache = {}
        key = (self.func, args[1:], frozenset(kw.items()))
        try:
            res = cache[key]
        except KeyError:
            res = cache[key] = self.func(*args, **kw)
        return res


class SafeDataset(torch.utils.data.Dataset):
    """A wrapper around a torch.utils.data.Dataset that allows dropping
    samples dynamically.
    """

    def __init__(self, dataset, eager_eval=False):
        """Creates a `SafeDataset` wrapper around `dataset`."""
        self.dataset = dataset
        self.eager_eval = eager_eval
        self._safe_indices = []
        self._unsafe_indices = []

    def _safe_get_item(self, idx):
        try:
            # differentiates IndexError occuring here from one occuring during
            # sample loading
            invalid_idx = False
            if idx >= len(self.dataset):
                invalid_idx = True
                raise IndexError
            sample = self.dataset[idx]
            if idx not in self._safe_indices:
                self._safe_indices.append(idx)
            return sample
        except Exception as e:
            if isinstance(e, IndexError):
                if invalid_idx:
                    raise
            if idx not in self._unsafe_indices:
                self._unsafe_indices.append(idx)
            return None

    def __len__(self):
        """Returns the length of the original dataset.
        NOTE: This is different from the number of actually valid samples.
        """
        return len(self.dataset)

    @memoize
    def __getitem__(self, idx):
        """Behaves like the standard __getitem__ for Dataset when the index
        has been built.
        """
        while idx < len(self.dataset):
            sample = self._safe_get_item(idx)
            if sample is not None:
                return sample
            idx += 1
        raise IndexError


class DummyDataset(torch.utils.data.Dataset):
    def __len__(self):
        return 400

    def __getitem__(self, idx):
        return torch.empty(10_000)

dataset = SafeDataset(DummyDataset())

for _ in torch.utils.data.DataLoader(dataset):
    pass
