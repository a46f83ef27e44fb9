# Source: https://github.com/deepchecks/deepchecks/pull/1341
#   code: ImageSegmentPerformance.initialize_run/update/_create_bins_and_metrics and the
#   module helpers of deepchecks/vision/checks/performance/image_segment_performance.py and the
#   Batch wrapper (deepchecks/vision/batch_wrapper.py) at e679b25bb^: update() keeps each
#   sample's (label, prediction, properties) in samples_for_binning until
#   number_of_samples_to_infer_bins samples are seen, the predictions coming from the user's
#   infer_on_batch without torch.no_grad
# Adapted: Context, the VisionData subclass (batch_to_images, batch_to_labels, infer_on_batch
#   with a softmax over the model output, as in the deepchecks classification examples) and
#   the check runner reduced to what update() uses; the ignite metrics by a small accuracy
#   metric with update/compute; the image properties by brightness and contrast; compute()
#   reduced to per-bin accuracy (no plotly display or conditions); pandas quantiles written with
#   numpy; the model by a small
#   convolutional classifier; 30 batches of 16 random 3x64x64 images; cpu, seeded.
import typing as t

import numpy as np
import torch
import torch.nn as nn


class Accuracy:
    def __init__(self):
        self.correct, self.total = 0, 0

    def update(self, output):
        y_pred, y = output
        self.correct += int((y_pred.argmax(1) == y).sum())
        self.total += len(y)

    def compute(self):
        return self.correct / max(self.total, 1)


def get_scorers_list(dataset, alternative_metrics=None):
    return {'Accuracy': Accuracy()}


default_image_properties = [
    {'name': 'Brightness', 'method': lambda images: [float(img.mean()) for img in images], 'output_type': 'continuous'},
    {'name': 'RMS Contrast', 'method': lambda images: [float(img.std()) for img in images], 'output_type': 'continuous'},
]


class ClassificationData:
    def batch_to_images(self, batch):
        return [img.permute(1, 2, 0).numpy() for img in batch[0]]

    def batch_to_labels(self, batch):
        return batch[1]

    def infer_on_batch(self, batch, model, device):
        return nn.Softmax(dim=1)(model.to(device)(batch[0].to(device)))


class Context:
    def __init__(self, dataset, model):
        self.dataset, self.model, self.device = dataset, model, torch.device('cpu')

    def get_data_by_kind(self, kind):
        return self.dataset


class Batch:
    def __init__(self, batch, context, dataset_kind, batch_start_index):
        self._context = context
        self._dataset_kind = dataset_kind
        self.batch_start_index = batch_start_index
        self._batch = [it.to(self._context.device) for it in batch]
        self._labels = None
        self._predictions = None
        self._images = None

    @property
    def labels(self):
        if self._labels is None:
            dataset = self._context.get_data_by_kind(self._dataset_kind)
            self._labels = dataset.batch_to_labels(self._batch)
        return self._labels

    @property
    def predictions(self):
        if self._predictions is None:
            dataset = self._context.get_data_by_kind(self._dataset_kind)
            model = self._context.model
            self._predictions = dataset.infer_on_batch(self._batch, model, self._context.device)
        return self._predictions

    @property
    def images(self):
        if self._images is None:
            dataset = self._context.get_data_by_kind(self._dataset_kind)
            self._images = dataset.batch_to_images(self._batch)
        return self._images


class ImageSegmentPerformance:
    def __init__(self, image_properties=None, alternative_metrics=None, number_of_bins: int = 5,
                 number_of_samples_to_infer_bins: int = 1000, n_to_show: int = 3):
        self.image_properties = image_properties or default_image_properties
        self.alternative_metrics = alternative_metrics
        self.number_of_bins = number_of_bins
        self.n_to_show = n_to_show
        self.number_of_samples_to_infer_bins = number_of_samples_to_infer_bins
        self._state = None

    def initialize_run(self, context, dataset_kind):
        self._state = {'samples_for_binning': [], 'bins': None}

    def update(self, context, batch, dataset_kind):
        images = batch.images
        predictions = batch.predictions
        labels = batch.labels

        samples_for_bin: t.List = self._state['samples_for_binning']
        bins = self._state['bins']

        batch_properties = [{} for _ in range(len(images))]
        for single_property in self.image_properties:
            for index, image_result in enumerate(single_property['method'](images)):
                batch_properties[index][single_property['name']] = image_result

        batch_data = zip(labels, predictions, batch_properties)
        if bins is not None:
            _divide_to_bins(bins, list(batch_data))
        else:
            samples_for_bin.extend(batch_data)
            if len(samples_for_bin) >= self.number_of_samples_to_infer_bins:
                self._state['bins'] = self._create_bins_and_metrics(samples_for_bin,
                                                                    context.get_data_by_kind(dataset_kind))
                del samples_for_bin

    def compute(self, context, dataset_kind):
        dataset = context.get_data_by_kind(dataset_kind)
        if self._state['bins'] is None:
            bins = self._create_bins_and_metrics(self._state['samples_for_binning'], dataset)
        else:
            bins = self._state['bins']
        return {prop: [(b['start'], b['stop'], b['count'], b['metrics']['Accuracy'].compute()) for b in prop_bins]
                for prop, prop_bins in bins.items()}

    def _create_bins_and_metrics(self, batch_data, dataset):
        quantiles = np.linspace(1 / self.number_of_bins, 1, self.number_of_bins - 1, endpoint=False)
        batch_properties = [b[2] for b in batch_data]
        bins = {}
        for prop in batch_properties[0]:
            property_col = np.array([p[prop] for p in batch_properties if p[prop] is not None])
            if len(property_col) == 0:
                continue
            quantile_values = list(set(np.quantile(property_col, quantiles).tolist()))
            bins[prop] = [{'start': start, 'stop': stop, 'count': 0,
                           'metrics': get_scorers_list(dataset, self.alternative_metrics)}
                          for start, stop in _create_open_bins_ranges(quantile_values)]
        _divide_to_bins(bins, batch_data)
        return bins


def _divide_to_bins(bins, batch_data):
    for property_name, bins_values in bins.items():
        for label, prediction, properties in batch_data:
            _add_to_fitting_bin(bins_values, properties[property_name], label, prediction)


def _create_open_bins_ranges(quantiles):
    quantiles = sorted(quantiles)
    return zip(([-np.inf] + quantiles), (quantiles + [np.inf]))


def _add_to_fitting_bin(bins, property_value, label, prediction):
    if property_value is None:
        return
    for single_bin in bins:
        if single_bin['start'] <= property_value < single_bin['stop']:
            single_bin['count'] += 1
            for metric in single_bin['metrics'].values():
                metric.update((_wrap_torch_or_list(prediction), _wrap_torch_or_list(label)))
            return


def _wrap_torch_or_list(value):
    if isinstance(value, torch.Tensor):
        return torch.unsqueeze(value, 0)
    return [value]


torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(),
                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))
context = Context(ClassificationData(), model)
check = ImageSegmentPerformance()
check.initialize_run(context, 'test')
for i in range(30):
    data = (torch.rand(16, 3, 64, 64), torch.randint(0, 10, (16,)))
    check.update(context, Batch(data, context, 'test', i * 16), 'test')
result = check.compute(context, 'test')
print({prop: [round(b[3], 3) for b in bins] for prop, bins in result.items()})
