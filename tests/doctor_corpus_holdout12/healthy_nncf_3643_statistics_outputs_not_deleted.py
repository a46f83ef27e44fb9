# Source: https://github.com/openvinotoolkit/nncf/pull/3643
#   code: src/nncf/common/tensor_statistics/aggregator.py (StatisticsAggregator.collect_statistics) at the parent of 04a44398
# Adapted: the NNCF graph, model transformer and engine factories are replaced by a torch engine that
# returns the model output together with the activations of the statistic points (forward hooks, run
# under torch.no_grad() as NNCF's torch engine does); statistic points use online min/max collectors;
# tqdm's track and the subset-size warning are left out; a small CNN is calibrated on 150 random images
# on CPU (no training).
from itertools import islice

import torch
import torch.nn as nn


class Dataset:
    def __init__(self, items):
        self.items = items

    def get_length(self):
        return len(self.items)

    def get_inference_data(self):
        return iter(self.items)


class MinMaxTensorCollector:
    def __init__(self, reduction_axes):
        self.reduction_axes = reduction_axes
        self._min = None
        self._max = None

    def register_input(self, x):
        cur_min = x.amin(dim=self.reduction_axes)
        cur_max = x.amax(dim=self.reduction_axes)
        self._min = cur_min if self._min is None else torch.minimum(self._min, cur_min)
        self._max = cur_max if self._max is None else torch.maximum(self._max, cur_max)

    def get_statistics(self):
        return {"min_values": self._min, "max_values": self._max}


class PTEngine:
    def __init__(self, model, target_points):
        self.model = model
        self._outputs = {}
        for name, module in model.named_modules():
            if name in target_points:
                module.register_forward_hook(self._make_hook(name))

    def _make_hook(self, name):
        def hook(module, inputs, output):
            self._outputs[name] = output
        return hook

    def infer(self, input_data):
        with torch.no_grad():
            self._outputs = {}
            self._outputs["output"] = self.model(input_data)
            return dict(self._outputs)


class StatisticsAggregator:
    def __init__(self, dataset):
        self.dataset = dataset
        self.stat_subset_size = None
        self.statistic_points = {}

    def register_statistic_point(self, target_point, collector):
        self.statistic_points[target_point] = collector

    def _get_iterations_number(self):
        dataset_length = self.dataset.get_length()
        if dataset_length and self.stat_subset_size:
            return min(dataset_length, self.stat_subset_size)
        return dataset_length or self.stat_subset_size

    def _process_outputs(self, outputs):
        return {name: value for name, value in outputs.items() if name in self.statistic_points}

    def _register_statistics(self, processed_outputs, merged_statistics):
        for target_point, collector in merged_statistics.items():
            collector.register_input(processed_outputs[target_point])

    def collect_statistics(self, model):
        if not self.statistic_points:
            return
        merged_statistics = self.statistic_points
        engine = PTEngine(model, set(merged_statistics))
        iterations_number = self._get_iterations_number()
        processed_samples = 0
        for input_data in islice(self.dataset.get_inference_data(), iterations_number):
            outputs = engine.infer(input_data)
            processed_outputs = self._process_outputs(outputs)
            self._register_statistics(processed_outputs, merged_statistics)
            processed_samples += 1
        if processed_samples == 0:
            raise ValueError("Empty dataset")


model = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(),
                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10)).eval()
calibration = Dataset([torch.rand(1, 3, 96, 96) for _ in range(150)])
aggregator = StatisticsAggregator(calibration)
aggregator.stat_subset_size = 300
for name in ("1", "3"):
    aggregator.register_statistic_point(name, MinMaxTensorCollector(reduction_axes=(0, 2, 3)))
aggregator.collect_statistics(model)
for name, collector in aggregator.statistic_points.items():
    stats = collector.get_statistics()
    print(name, tuple(stats["min_values"].shape), float(stats["max_values"].max()))
