# Source: https://github.com/pfnet/pytorch-pfn-extras/blob/39fd07116fc10ba6db2454c3c84119b3052e7c91/pytorch_pfn_extras/reporting.py
# Adapted excerpt, after the fix https://github.com/pfnet/pytorch-pfn-extras/commit/39fd07116fc10ba6db2454c3c84119b3052e7c91
# (trimmed to the code the fix touches; omitted lines are marked).
import collections
# ... (lines 2-7 omitted)
import torch
# ... (lines 9-13 omitted)
def _copy_variable(value):
    if isinstance(value, torch.Tensor):
        return value.detach()
    return value
# ... (lines 18-19 omitted)
class Reporter:
    ...  # (lines 21-135 omitted)
    def report(self, values, observer=None):
        ...  # (lines 137-154 omitted)
        values = {k: _copy_variable(v) for k, v in values.items()}

        if observer is not None:
            observer_id = id(observer)
            if observer_id not in self._observer_names:
                raise KeyError(
                    'Given observer is not registered to the reporter.')
            observer_name = self._observer_names[observer_id]
            for key, value in values.items():
                name = '%s/%s' % (observer_name, key)
                self.observation[name] = value
        else:
            self.observation.update(values)
# ... (lines 168-247 omitted)
class Summary:
    ...  # (lines 249-255 omitted)
    def __init__(self):
        self._x = 0.0
        self._x2 = 0.0
        self._n = 0

    def add(self, value, weight=1):
        """Adds a scalar value.

        Args:
            value: Scalar value to accumulate. It is either a NumPy scalar or
                a zero-dimensional array (on CPU or GPU).
            weight: An optional weight for the value. It is a NumPy scalar or
                a zero-dimensional array (on CPU or GPU).
                Default is 1 (integer).

        """
        self._x += weight * value
        self._x2 += weight * value * value
        self._n += weight
# ... (lines 275-310 omitted)
class DictSummary:
    ...  # (lines 312-320 omitted)
    def __init__(self):
        self._summaries = collections.defaultdict(Summary)

    def add(self, d):
        ...  # (lines 325-333 omitted)
        summaries = self._summaries
        for k, v in d.items():
            w = 1
            if isinstance(v, tuple):
                w = v[1]
                v = v[0]
                if not numpy.isscalar(w) and not getattr(w, 'ndim', -1) == 0:
                    raise ValueError(
                        'Given weight to {} was not scalar.'.format(k))
            if numpy.isscalar(v) or getattr(v, 'ndim', -1) == 0:
                summaries[k].add(v, weight=w)

