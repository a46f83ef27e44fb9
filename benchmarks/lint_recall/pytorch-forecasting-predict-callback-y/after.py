# Source: https://github.com/sktime/pytorch-forecasting/blob/dd8cea84bf5063246ba8cdd005f0fd74fa459abd/pytorch_forecasting/models/base/_base_model.py
# Adapted excerpt, after the fix https://github.com/sktime/pytorch-forecasting/commit/dd8cea84bf5063246ba8cdd005f0fd74fa459abd
# (trimmed to the code the fix touches; omitted lines are marked).
import scipy.stats
# ... (lines 24-211 omitted)
class PredictCallback(BasePredictionWriter):
    ...  # (lines 213-238 omitted)
    def _reset_data(self, result: bool = True):
        # reset data objects to save results into
        self._output = []
        self._decode_lengths = []
        self._x_list = []
        self._index = []
        self._y = []
        if result:
            self._result = []

    def on_predict_batch_end(
        self,
        trainer: Trainer,
        pl_module: LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        # extract predictions form output
        x = batch[0]
        out = outputs

        lengths = x["decoder_lengths"]
        # ... (lines 263-308 omitted)

        out = move_to_device(detach(out), "cpu")
        x = move_to_device(detach(x), "cpu")
        self._output.append(out)
        out = dict(output=out)
        if self.return_x:
            self._x_list.append(x)
            out["x"] = self._x_list[-1]
        if self.return_index:
            self._index.append(trainer.predict_dataloaders.dataset.x_to_index(x))
            out["index"] = self._index[-1]
        if self.return_decoder_lengths:
            self._decode_lengths.append(lengths.cpu())
            out["decoder_lengths"] = self._decode_lengths[-1]
        if self.return_y:
            self._y.append(move_to_device(detach(batch[1]), "cpu"))
            out["y"] = self._y[-1]

