# Source: https://github.com/allenai/OLMo/pull/164
#   code: olmo/model.py (Olmo.generate and its step function) and olmo/beam_search.py
#   (BeamSearch._search, DeterministicSampler, SequenceLogProbabilityScorer, copied from
#   allennlp) at the parent of commit 4e5710cd, before torch.no_grad() was added
# Adapted: a 2-layer, 64-wide causal transformer with a 500-token vocabulary instead of an
#   OLMo checkpoint; BeamSearch kept to the code path generate uses (no constraints, the
#   default deterministic sampler and sequence log-probability scorer, min_steps 0); an end
#   token the random model never picks first; 4 prompts of 8 tokens, beam_size 2,
#   max_steps 40.
from typing import Dict, List, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F


class DeterministicSampler:
    def init_state(self, start_class_log_probabilities, batch_size, num_classes):
        return {}

    def sample_nodes(self, log_probs, per_node_beam_size, state):
        selected_log_probs, selected_indices = torch.topk(log_probs, per_node_beam_size, dim=-1)
        return selected_log_probs, selected_indices, {}

    def sample_beams(self, log_probs, beam_size, state):
        selected_log_probs, selected_indices = torch.topk(log_probs, beam_size, dim=-1)
        return selected_log_probs, selected_indices, {}


class BeamSearch:
    def __init__(self, end_index, max_steps=50, beam_size=10, per_node_beam_size=None):
        self._end_index = end_index
        self.max_steps = max_steps
        self.beam_size = beam_size
        self.per_node_beam_size = per_node_beam_size or beam_size
        self.sampler = DeterministicSampler()

    def search(self, start_predictions, start_state, step):
        return self._search(start_predictions, start_state, lambda p, s, t: step(p, s))

    def _search(self, start_predictions, start_state, step) -> Tuple[torch.Tensor, torch.Tensor]:
        batch_size = start_predictions.size()[0]
        predictions: List[torch.Tensor] = []
        backpointers: List[torch.Tensor] = []
        start_class_log_probabilities, state = step(start_predictions, start_state, 0)
        num_classes = start_class_log_probabilities.size()[1]
        sampler_state = self.sampler.init_state(start_class_log_probabilities, batch_size, num_classes)
        start_top_log_probabilities, start_predicted_classes, sampler_state = self.sampler.sample_beams(
            start_class_log_probabilities, self.beam_size, sampler_state)
        last_log_probabilities = start_top_log_probabilities
        predictions.append(start_predicted_classes)
        log_probs_after_end = start_class_log_probabilities.new_full(
            (batch_size * self.beam_size, num_classes), torch.finfo(start_class_log_probabilities.dtype).min)
        log_probs_after_end[:, self._end_index] = 0.0
        self._update_initial_state(state, batch_size)
        for timestep in range(self.max_steps - 1):
            last_predictions = predictions[-1].reshape(batch_size * self.beam_size)
            if (last_predictions == self._end_index).all():
                break
            class_log_probabilities, state = step(last_predictions, state, timestep + 1)
            last_predictions_expanded = last_predictions.unsqueeze(-1).expand(batch_size * self.beam_size, num_classes)
            cleaned_log_probabilities = torch.where(last_predictions_expanded == self._end_index,
                                                    log_probs_after_end, class_log_probabilities)
            top_log_probabilities, predicted_classes, sampler_state = self.sampler.sample_nodes(
                cleaned_log_probabilities, self.per_node_beam_size, sampler_state)
            expanded_last_log_probabilities = (
                last_log_probabilities.unsqueeze(2)
                .expand(batch_size, self.beam_size, self.per_node_beam_size)
                .reshape(batch_size * self.beam_size, self.per_node_beam_size))
            summed_top_log_probabilities = top_log_probabilities + expanded_last_log_probabilities
            reshaped_summed = summed_top_log_probabilities.reshape(batch_size, self.beam_size * self.per_node_beam_size)
            reshaped_predicted_classes = predicted_classes.reshape(batch_size, self.beam_size * self.per_node_beam_size)
            restricted_beam_log_probs, restricted_beam_indices, sampler_state = self.sampler.sample_beams(
                reshaped_summed, self.beam_size, sampler_state)
            restricted_predicted_classes = reshaped_predicted_classes.gather(1, restricted_beam_indices)
            predictions.append(restricted_predicted_classes)
            last_log_probabilities = restricted_beam_log_probs
            backpointer = torch.divide(restricted_beam_indices, self.per_node_beam_size, rounding_mode="trunc")
            backpointers.append(backpointer)
            self._update_state(state, backpointer)
        all_predictions = torch.stack(predictions, 2)
        final_scores = last_log_probabilities
        sorted_final_scores, sorted_indices = torch.sort(final_scores, dim=1, descending=True)
        sorted_all_predictions = torch.gather(all_predictions, 1, sorted_indices.unsqueeze(-1).expand_as(all_predictions))
        return sorted_all_predictions, sorted_final_scores

    def _update_initial_state(self, state, batch_size):
        for key, state_tensor in state.items():
            _, *last_dims = state_tensor.size()
            state[key] = (state_tensor.unsqueeze(1).expand(batch_size, self.beam_size, *last_dims)
                          .reshape(batch_size * self.beam_size, *last_dims))

    def _update_state(self, state, backpointer):
        batch_size = backpointer.size()[0]
        for key, state_tensor in state.items():
            _, *last_dims = state_tensor.size()
            expanded_backpointer = backpointer.view(batch_size, self.beam_size, *([1] * len(last_dims))).expand(
                batch_size, self.beam_size, *last_dims)
            state[key] = (state_tensor.reshape(batch_size, self.beam_size, *last_dims)
                          .gather(1, expanded_backpointer).reshape(batch_size * self.beam_size, *last_dims))


class Olmo(nn.Module):
    def __init__(self, vocab_size=500, d_model=64, n_layers=2, eos_token_id=499):
        super().__init__()
        self.eos_token_id = eos_token_id
        self.wte = nn.Embedding(vocab_size, d_model)
        self.wpe = nn.Embedding(256, d_model)
        layer = nn.TransformerEncoderLayer(d_model, 4, 4 * d_model, dropout=0.0, batch_first=True)
        self.blocks = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)
        self.ff_out = nn.Linear(d_model, vocab_size)
        with torch.no_grad():
            self.ff_out.bias[eos_token_id] = -20.0

    def forward(self, input_ids):
        seq_len = input_ids.shape[1]
        x = self.wte(input_ids) + self.wpe(torch.arange(seq_len))
        mask = nn.Transformer.generate_square_subsequent_mask(seq_len)
        return self.ff_out(self.blocks(x, mask=mask, is_causal=True))

    def generate(self, input_ids, max_steps=10, beam_size=1):
        beam_search = BeamSearch(self.eos_token_id, max_steps=max_steps, beam_size=beam_size)
        tokens_generated = 0

        def step(last_predictions: torch.Tensor, state: Dict[str, torch.Tensor]):
            nonlocal tokens_generated
            input_ids = state["input_ids"]
            if tokens_generated > 0:
                input_ids = torch.cat((input_ids, last_predictions.unsqueeze(1)), dim=-1)
            tokens_generated += 1
            logits = self(input_ids)
            log_probs = F.log_softmax(logits[:, -1, :], dim=-1)
            state = {"input_ids": input_ids}
            return log_probs, state

        initial_preds = input_ids.new_zeros((input_ids.shape[0],))
        state: Dict[str, torch.Tensor] = {"input_ids": input_ids}
        token_ids, scores = beam_search.search(initial_preds, state, step)
        return token_ids, scores


torch.manual_seed(0)
model = Olmo().eval()
prompts = torch.randint(0, 498, (3, 4, 8))
for input_ids in prompts:
    token_ids, scores = model.generate(input_ids, max_steps=40, beam_size=2)
    print(token_ids.shape, scores[:, 0].tolist())
