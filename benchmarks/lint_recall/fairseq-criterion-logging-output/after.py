# Source: https://github.com/facebookresearch/fairseq/blob/8eb9123f560d32940f96a01369d61c1684dce085/fairseq/criterions/masked_lm.py
# Adapted excerpt, after the fix https://github.com/facebookresearch/fairseq/commit/8eb9123f560d32940f96a01369d61c1684dce085
# (trimmed to the code the fix touches; omitted lines are marked).
import math

import torch
import torch.nn.functional as F

from fairseq import metrics, modules, utils
from fairseq.criterions import FairseqCriterion, register_criterion
# ... (lines 13-14 omitted)
@register_criterion('masked_lm')
class MaskedLmLoss(FairseqCriterion):
    ...  # (lines 17-24 omitted)
    def forward(self, model, sample, reduce=True):
        ...  # (lines 26-51 omitted)
        logits = model(**sample['net_input'], masked_tokens=masked_tokens)[0]
        targets = model.get_targets(sample, [logits])
        if masked_tokens is not None:
            targets = targets[masked_tokens]

        loss = modules.cross_entropy(
            logits.view(-1, logits.size(-1)),
            targets.view(-1),
            reduction='sum',
            ignore_index=self.padding_idx,
        )

        logging_output = {
            'loss': loss if self.tpu else loss.data,
            'ntokens': sample['ntokens'],
            'nsentences': sample['nsentences'],
            'sample_size': sample_size,
        }
        return loss, sample_size, logging_output

    @staticmethod
    def reduce_metrics(logging_outputs) -> None:
        """Aggregate logging outputs from data parallel training."""
        loss_sum = sum(log.get('loss', 0) for log in logging_outputs)
        sample_size = sum(log.get('sample_size', 0) for log in logging_outputs)

        metrics.log_scalar('loss', loss_sum / sample_size / math.log(2), sample_size, round=3)
        metrics.log_derived('ppl', lambda meters: utils.get_perplexity(meters['loss'].avg))
