# Source: https://github.com/OpenNMT/OpenNMT-py/blob/f240346274925743379b72c221a47208cc4bd1d0/onmt/trainer.py
# Adapted excerpt, after the fix https://github.com/OpenNMT/OpenNMT-py/commit/f240346274925743379b72c221a47208cc4bd1d0
# (trimmed to the code the fix touches; omitted lines are marked).
import torch
import onmt.inputters as inputters
import onmt.utils

from onmt.utils.logging import logger
# ... (lines 17-59 omitted)
class Trainer(object):
    ...  # (lines 61-210 omitted)
    def validate(self, valid_iter):
        """ Validate model.
            valid_iter: validate data iterator
        Returns:
            :obj:`nmt.Statistics`: validation loss statistics
        """
        # Set model in validating mode.
        self.model.eval()

        with torch.no_grad():
            stats = onmt.utils.Statistics()

            for batch in valid_iter:
                src = inputters.make_features(batch, 'src', self.data_type)
                if self.data_type == 'text':
                    _, src_lengths = batch.src
                elif self.data_type == 'audio':
                    src_lengths = batch.src_lengths
                else:
                    src_lengths = None

                tgt = inputters.make_features(batch, 'tgt')

                # F-prop through the model.
                outputs, attns = self.model(src, tgt, src_lengths)

                # Compute loss.
                batch_stats = self.valid_loss.monolithic_compute_loss(
                    batch, outputs, attns)

                # Update statistics.
                stats.update(batch_stats)

        # Set model back to training mode.
        self.model.train()

        return stats
