# Source: https://github.com/HLR/DomiKnowS/blob/5557bb3c5e773cbb381d870d216dacc39bf26ecf/domiknows/program/metric.py
# Adapted excerpt, after the fix https://github.com/HLR/DomiKnowS/commit/5557bb3c5e773cbb381d870d216dacc39bf26ecf
# (trimmed to the code the fix touches; omitted lines are marked).
from collections import defaultdict
from typing import Any
import numpy as np
import torch
from sklearn.metrics import confusion_matrix, classification_report
from ..base import AutoNamed
from ..utils import wrap_batch


# ... (lines 10-109 omitted)
class MetricTracker(torch.nn.Module):
    """
    A utility class for tracking metrics for all datanodes.

    Attributes:
        metric (callable): The metric function to track.
        list (list): A list of metric values for all the datanodes.
        dict (defaultdict): A dictionary of metric values grouped by keys.
    """
    def __init__(self, metric):
        """
        Initializes the MetricTracker with a specified metric function.

        Args:
            metric (callable): The metric function to be tracked.
        """
        super().__init__()
        self.metric = metric
        self.list = []
        self.dict = defaultdict(list)

    def reset(self):
        """
        Resets the internal storage (both list and dict) to their initial empty state.
        """
        self.list.clear()
        self.dict.clear()

    def __call__(self, *args, **kwargs) -> Any:
        """
        Computes the metric using the provided arguments and stores the result in the internal list.

        Returns:
            Any: The computed metric value.
        """
        value = self.metric(*args, **kwargs)
        # Tracker lists are for summary/logging only — keeping grad-attached
        # tensors here stacks autograd graphs across steps (leaks into OOM
        # on long training runs).
        self.list.append(value.detach() if torch.is_tensor(value) else value)
        return value

    def __call_dict__(self, keys, *args, **kwargs) -> Any:
        """
        Computes the metric using the provided arguments and stores the result in the internal dictionary with the specified key.

        Args:
            keys: The key under which the metric value should be stored.

        Returns:
            Any: The computed metric value.
        """
        value = self.metric(*args, **kwargs)
        self.dict[keys].append(value.detach() if torch.is_tensor(value) else value)
        return value

    def __getitem__(self, keys):
        """
        Returns a lambda function that computes and stores the metric in the internal dictionary for a specified key.

        Args:
            keys: The key under which the metric value should be stored.

        Returns:
            callable: A lambda function to compute and store the metric value.
        """
        return lambda *args, **kwargs: self.__call_dict__(keys, *args, **kwargs)

    def kprint(self, k):
        """
        Custom key printing function based on the type and properties of the key.

        Args:
            k: The key to be printed.

        Returns:
            str: A string representation of the key.
        """
        if (
            isinstance(k, tuple) and
            len(k) == 2 and
            isinstance(k[0], AutoNamed) and 
            isinstance(k[1], AutoNamed)):
            return k[0].sup.name.name
        else:
            return k

    def value(self, reset=False):
        """
        Retrieves the value(s) of the computed metric(s).

        Args:
            reset (bool, optional): If True, resets the internal storage after retrieving the value. Defaults to False.

        Returns:
            Any: The metric value(s), either as a single value, list, or dictionary.
        """
        if self.list and self.dict:
            raise RuntimeError('{} cannot be used as list-like and dict-like the same time.'.format(type(self)))
        if self.list:
            value = wrap_batch(self.list)
            value = super().__call__(value)
        elif self.dict:
            func = super().__call__
            value = {self.kprint(k): func(v) for k, v in self.dict.items()}
        else:
            value = None
        if reset:
            self.reset()
        return value

    @staticmethod
    def _to_python_scalars(value):
        # Replaced nested Python for-loops with recursive dict comprehension (issue #315).
        # Reduces Python-level overhead when converting metric tensors for display.
        if isinstance(value, dict):
            return {k: MetricTracker._to_python_scalars(v) for k, v in value.items()}
        if torch.is_tensor(value):
            return value.item()
        return value

    def __str__(self):
        """
        Provides a string representation of the computed metric value(s).

        Returns:
            str: A string representation of the metric value(s).
        """
        value = self.value()
        if isinstance(value, dict):
            value = self._to_python_scalars(value)
        return str(value)

# ... (lines 243-368 omitted)
