# Source: https://github.com/NVIDIA/NVFlare/blob/0af7099e204546461b7668a7300903f0e6fb2fed/examples/advanced/vertical_federated_learning/cifar10-splitnn/src/splitnn/cifar10_learner_splitnn.py
# Adapted excerpt, after the fix https://github.com/NVIDIA/NVFlare/commit/0af7099e204546461b7668a7300903f0e6fb2fed
# (trimmed to the code the fix touches; omitted lines are marked).
# ... (lines 1-14 omitted)
from timeit import default_timer as timer

import numpy as np
import torch
import torch.optim as optim
from splitnn.cifar10_splitnn_dataset import CIFAR10SplitNN
from torch.utils.tensorboard import SummaryWriter
from torchvision import transforms

from nvflare.apis.dxo import DXO, from_shareable
from nvflare.apis.fl_constant import FLContextKey, ReturnCode
from nvflare.apis.fl_context import FLContext
from nvflare.apis.shareable import Shareable, make_reply
from nvflare.apis.signal import Signal
from nvflare.app_common.abstract.learner_spec import Learner
from nvflare.app_common.app_constant import AppConstants
from nvflare.app_common.workflows.splitnn_workflow import SplitNNConstants, SplitNNDataKind
from nvflare.app_opt.pt.decomposers import TensorDecomposer
from nvflare.fuel.f3.stats_pool import StatsPoolManager
from nvflare.fuel.utils import fobs


class CIFAR10LearnerSplitNN(Learner):
    def __init__(
        self,
        dataset_root: str = "./dataset",
        intersection_file: str = None,
        lr: float = 1e-2,
        model: dict = None,
        analytic_sender_id: str = "analytic_sender",
        fp16: bool = True,
        val_freq: int = 1000,
    ):
        ...  # (lines 48-61 omitted)
        super().__init__()
        self.dataset_root = dataset_root
        self.intersection_file = intersection_file
        self.lr = lr
        self.model = model
        self.analytic_sender_id = analytic_sender_id
        self.fp16 = fp16
        self.val_freq = val_freq

        self.target_names = None
        self.app_root = None
        self.current_round = None
        self.num_rounds = None
        self.batch_size = None
        self.writer = None
        self.client_name = None
        self.other_client = None
        self.device = None
        self.optimizer = None
        self.criterion = None
        self.transform_train = None
        self.transform_valid = None
        self.train_dataset = None
        self.valid_dataset = None
        self.split_id = None
        self.train_activations = None
        self.train_batch_indices = None
        self.train_size = 0
        self.val_loss = []
        self.val_labels = []
        self.val_pred_labels = []
        self.compute_stats_pool = None

        # use FOBS serializing/deserializing PyTorch tensors
        fobs.register(TensorDecomposer)

    ...  # (lines 98-226 omitted)
    def _train_step_data_side(self, batch_indices):
        t_start = timer()
        self.model.train()

        inputs = self.train_dataset.get_batch(batch_indices)
        inputs = inputs.to(self.device)

        self.train_activations = self.model.forward(inputs)  # keep on site-1

        self.compute_stats_pool.record_value(category="_train_step_data_side", value=timer() - t_start)

        return self.train_activations.detach().requires_grad_()  # x to be sent to other client

    def _val_step_data_side(self, batch_indices):
        t_start = timer()
        self.model.eval()
        with torch.no_grad():
            inputs = self.valid_dataset.get_batch(batch_indices)
            inputs = inputs.to(self.device)

            _val_activations = self.model.forward(inputs)  # keep on site-1

        self.compute_stats_pool.record_value(category="_val_step_data_side", value=timer() - t_start)

        return _val_activations.detach().flatten(start_dim=1, end_dim=-1)  # x to be sent to other client

    ...  # (lines 253-294 omitted)
    def _val_step_label_side(self, batch_indices, activations, fl_ctx: FLContext):
        t_start = timer()
        self.model.eval()
        with torch.no_grad():
            labels = self.valid_dataset.get_batch(batch_indices)
            labels = labels.to(self.device)

            if self.fp16:
                activations = activations.type(torch.float32)  # return to default pytorch precision

            activations = activations.to(self.device)

            pred = self.model.forward(activations)

            loss = self.criterion(pred, labels)
            self.val_loss.append(loss.unsqueeze(0))  # unsqueeze needed for later concatenation

            _, pred_labels = torch.max(pred, 1)

            self.val_pred_labels.extend(pred_labels.unsqueeze(0))
            self.val_labels.extend(labels.unsqueeze(0))

        self.compute_stats_pool.record_value(category="_val_step_label_side", value=timer() - t_start)

    def _log_validation(self, fl_ctx: FLContext):
        if len(self.val_loss) > 0:
            loss = torch.mean(torch.cat(self.val_loss))

            _val_pred_labels = torch.cat(self.val_pred_labels)
            _val_labels = torch.cat(self.val_labels)
            acc = (_val_pred_labels == _val_labels).sum() / len(_val_labels)

            self.log_info(
                fl_ctx,
                f"Round {self.current_round}/{self.num_rounds} val_loss: {loss.item():.4f}, val_accuracy: {acc.item():.4f}",
            )
            if self.writer:
                self.writer.add_scalar("val_loss", loss, self.current_round)
                self.writer.add_scalar("val_accuracy", acc, self.current_round)

            self.val_loss = []
            self.val_labels = []
            self.val_pred_labels = []
    ...  # (lines 338-585 omitted)
    def _validate(self, fl_ctx: FLContext):
        t_start = timer()
        engine = fl_ctx.get_engine()

        idx = np.arange(len(self.valid_dataset))
        n_batches = int(np.ceil(len(self.valid_dataset) / self.batch_size))
        for _val_round, _val_batch_indices in enumerate(np.array_split(idx, n_batches)):
            activations = self._val_step_data_side(batch_indices=_val_batch_indices)

            # Site-2 label loss & accuracy
            dxo = DXO(data={SplitNNConstants.DATA: fobs.dumps(activations)}, data_kind=SplitNNDataKind.ACTIVATIONS)
            dxo.set_meta_prop(SplitNNConstants.BATCH_INDICES, _val_batch_indices)

            data_shareable = dxo.to_shareable()
            data_shareable.set_header(AppConstants.CURRENT_ROUND, _val_round)
            data_shareable.set_header(AppConstants.NUM_ROUNDS, n_batches)
            data_shareable.add_cookie(AppConstants.CONTRIBUTION_ROUND, _val_round)

            # send to other side to validate
            engine.send_aux_request(
                targets=self.other_client,
                topic=SplitNNConstants.TASK_VALID_LABEL_STEP,
                request=data_shareable,
                timeout=SplitNNConstants.TIMEOUT,
                fl_ctx=fl_ctx,
            )

        self.compute_stats_pool.record_value(category="_validate", value=timer() - t_start)

        self.log_debug(fl_ctx, "finished validation.")
