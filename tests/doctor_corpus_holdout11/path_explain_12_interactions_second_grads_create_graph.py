# Source: https://github.com/suinleelab/path_explain/pull/12
#   code: path_explain/explainers/path_explainer_torch.py (PathExplainerTorch) at commit
#   ef38e67^ (45d1cd6^), before the pull request
# Adapted: PathExplainerTorch kept as it was for the use_expectation=True path with a
#   single-output model (gather_nd, the tqdm progress bar and the docstrings dropped); the
#   user side is the README's usage, explaining a tabular model's interactions batch after
#   batch and keeping each batch's result: a small MLP on 6 random features, 12 batches of
#   8 rows, a baseline of 32 random rows, num_samples=16; cpu, seeded.
import numpy as np
import torch
import torch.nn as nn
from torch.autograd import grad


class PathExplainerTorch(object):
    def __init__(self, model):
        self.model = model
        return

    def _get_ref_tensor(self, baseline, batch_size, num_samples):
        number_to_draw = num_samples * batch_size
        replace = baseline.shape[0] < number_to_draw
        sample_indices = np.random.choice(baseline.shape[0],
                                          size=number_to_draw,
                                          replace=replace)
        ref_tensor = baseline[sample_indices, :]
        return ref_tensor

    def _get_samples_input(self, input_tensor, baseline,
                           num_samples, use_expectation):
        input_dims = list(input_tensor.size())[1:]
        num_input_dims = len(input_dims)
        batch_size = input_tensor.size()[0]
        reference_tensor = self._get_ref_tensor(baseline, batch_size, num_samples)
        shape = reference_tensor.shape
        reference_tensor = reference_tensor.view(batch_size, num_samples, *(shape[1:]))
        t_tensor = torch.FloatTensor(batch_size, num_samples).uniform_(0, 1).to(reference_tensor.device)
        shape = [batch_size, num_samples] + [1] * num_input_dims
        interp_coef = t_tensor.view(*shape)
        end_point_ref = (1.0 - interp_coef) * reference_tensor
        input_expand_mult = input_tensor.unsqueeze(1)
        end_point_input = interp_coef * input_expand_mult
        samples_input = end_point_input + end_point_ref
        samples_delta = self._get_samples_delta(input_tensor, reference_tensor)
        samples_delta = samples_delta.to(samples_input.device)
        return samples_input, samples_delta

    def _get_samples_delta(self, input_tensor, reference_tensor):
        input_expand_mult = input_tensor.unsqueeze(1)
        sd = input_expand_mult - reference_tensor
        return sd

    def _get_grads(self, samples_input, output_indices=None):
        grad_tensor = torch.zeros(samples_input.shape).float().to(samples_input.device)
        k_ = samples_input.shape[1]
        for i in range(k_):
            particular_slice = samples_input[:, i]
            batch_output = self.model(particular_slice)
            model_grads = grad(
                outputs=batch_output,
                inputs=particular_slice,
                grad_outputs=torch.ones_like(batch_output).to(samples_input.device),
                create_graph=True)
            grad_tensor[:, i, :] = model_grads[0]
        return grad_tensor

    def attributions(self, input_tensor, baseline,
                     num_samples=50, use_expectation=True,
                     output_indices=None):
        samples_input, samples_delta = self._get_samples_input(input_tensor, baseline,
                                                               num_samples, use_expectation)
        grad_tensor = self._get_grads(samples_input, output_indices)
        mult_grads = samples_delta * grad_tensor
        attributions = mult_grads.mean(1)
        return attributions

    def interactions(self, input_tensor, baseline,
                     num_samples=50, use_expectation=True,
                     output_indices=None, interaction_index=None,
                     verbose=True):
        inner_loop_nsamples = int(round(np.sqrt(num_samples)))
        samples_input, samples_delta = self._get_samples_input(input_tensor, baseline,
                                                               inner_loop_nsamples, use_expectation)
        interaction_mult_tensor = torch.zeros([input_tensor.size(0), samples_input.size(1),
                                               input_tensor.size(1), input_tensor.size(1)])
        ig_tensor = torch.zeros(samples_input.shape).float()
        loop_num = inner_loop_nsamples
        for i in range(loop_num):
            particular_slice = samples_input[:, i]
            ig_tensor[:, i, :] = self.attributions(particular_slice, baseline,
                                                   num_samples=inner_loop_nsamples,
                                                   use_expectation=use_expectation,
                                                   output_indices=output_indices)
            for feature in range(input_tensor.size(1)):
                second_grads = grad(
                    outputs=ig_tensor[:, i, feature],
                    inputs=particular_slice,
                    grad_outputs=torch.ones_like(ig_tensor[:, i, feature]),
                    create_graph=True)[0]
                interaction_mult_tensor[:, i, feature, :] = second_grads

        interaction_mult_tensor = interaction_mult_tensor.to(samples_delta.device)
        interaction_tensor = interaction_mult_tensor * samples_delta.unsqueeze(2)
        interactions = interaction_tensor.mean(1)
        return interactions


torch.manual_seed(0)
np.random.seed(0)
model = nn.Sequential(nn.Linear(6, 32), nn.Softplus(), nn.Linear(32, 1))
model.eval()
x_train = torch.randn(32, 6)
explainer = PathExplainerTorch(model)

all_interactions = []
for batch in range(12):
    x = torch.randn(8, 6)
    x.requires_grad = True
    baseline = x_train
    batch_interactions = explainer.interactions(input_tensor=x, baseline=baseline,
                                                num_samples=16, use_expectation=True,
                                                verbose=False)
    all_interactions.append(batch_interactions)
    print(batch, batch_interactions.shape)
