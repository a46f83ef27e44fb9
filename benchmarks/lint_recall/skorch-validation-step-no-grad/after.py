# Source: https://github.com/skorch-dev/skorch/blob/e3e13f654d35eb2eafd3ac196fa30f01f11f33c2/skorch/net.py
# Adapted excerpt, after the fix https://github.com/skorch-dev/skorch/commit/e3e13f654d35eb2eafd3ac196fa30f01f11f33c2
# (trimmed to the code the fix touches; omitted lines are marked).
import torch
# ... (lines 13-43 omitted)
class NeuralNet(object):
    ...  # (lines 45-456 omitted)
    def validation_step(self, Xi, yi, **fit_params):
        ...  # (lines 458-476 omitted)
        self.module_.eval()
        with torch.no_grad():
            y_pred = self.infer(Xi, **fit_params)
            loss = self.get_loss(y_pred, yi, X=Xi, training=False)
        return {
            'loss': loss,
            'y_pred': y_pred,
            }
    # ... (lines 485-534 omitted)
    def fit_loop(self, X, y=None, epochs=None, **fit_params):
        ...  # (lines 536-569 omitted)
        self.check_data(X, y)
        epochs = epochs if epochs is not None else self.max_epochs

        dataset_train, dataset_valid = self.get_split_datasets(
            X, y, **fit_params)
        on_epoch_kwargs = {
            'dataset_train': dataset_train,
            'dataset_valid': dataset_valid,
        }

        for _ in range(epochs):
            self.notify('on_epoch_begin', **on_epoch_kwargs)

            for Xi, yi in self.get_iterator(dataset_train, training=True):
                self.notify('on_batch_begin', X=Xi, y=yi, training=True)
                step = self.train_step(Xi, yi, **fit_params)
                self.history.record_batch(
                    'train_loss', step['loss'].data.item())
                self.history.record_batch('train_batch_size', get_len(Xi))
                self.notify('on_batch_end', X=Xi, y=yi, training=True, **step)

            if dataset_valid is None:
                self.notify('on_epoch_end', **on_epoch_kwargs)
                continue

            for Xi, yi in self.get_iterator(dataset_valid, training=False):
                self.notify('on_batch_begin', X=Xi, y=yi, training=False)
                step = self.validation_step(Xi, yi, **fit_params)
                self.history.record_batch(
                    'valid_loss', step['loss'].data.item())
                self.history.record_batch('valid_batch_size', get_len(Xi))
                self.notify('on_batch_end', X=Xi, y=yi, training=False, **step)
