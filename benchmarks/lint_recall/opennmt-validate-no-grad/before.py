# Source: https://github.com/OpenNMT/OpenNMT-py/blob/27c6fd55003f409251ba09974f9955f08a8f4a15/onmt/trainer.py
# Adapted excerpt, before the fix https://github.com/OpenNMT/OpenNMT-py/commit/f240346274925743379b72c221a47208cc4bd1d0
# (trimmed to the code the fix touches; omitted lines are marked).
import onmt.inputters as inputters
import onmt.utils

from onmt.utils.logging import logger
# ... (lines 16-58 omitted)
class Trainer(object):
    ...  # (lines 60-209 omitted)
    def validate(self, valid_iter):
        """ Validate model.
            valid_iter: validate data iterator
        Returns:
            :obj:`nmt.Statistics`: validation loss statistics
        """
        # Set model in validating mode.
        self.model.eval()

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
