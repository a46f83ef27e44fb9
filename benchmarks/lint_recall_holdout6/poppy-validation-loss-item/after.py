# Source: https://github.com/HongtengXu/PoPPy/blob/170046b3515d79c3c2e97cabdd5666bcbcd4af15/model/PointProcess.py
# Adapted excerpt, at the fix https://github.com/HongtengXu/PoPPy/commit/170046b3515d79c3c2e97cabdd5666bcbcd4af15
# (trimmed to the code the fix touches; omitted lines are marked).
"""
Parent class of point process model, which is actually a Poisson process
"""

import copy
import numpy as np
import time
import torch
from dev.util import logger
from preprocess.DataOperation import samples2dict
from model.OtherLayers import MaxLogLike, LeastSquare, CrossEntropy, LowerBoundClipper
import model.ExogenousIntensityFamily


class PointProcessModel(object):
    """
    The class of generalized Hawkes process model
    contains most of necessary function.
    """

    def __init__(self, num_type, mu_dict, loss_type, use_cuda):
        """
        Initialize generalized Hawkes process
        :param num_type: int, the number of event types.
        :param loss_type: str, the type of loss functions
            The length of the list is the number of modalities of the model
            Each element of the list is the number of event categories for each modality
        """
        self.device = torch.device('cuda:0' if use_cuda else 'cpu')
        self.model_name = 'A Poisson Process'
        self.num_type = num_type
        exogenousIntensity = getattr(model.ExogenousIntensityFamily, mu_dict['model_name'])
        self.lambda_model = exogenousIntensity(num_type, mu_dict['parameter_set'])

        self.loss_type = loss_type
        if self.loss_type == 'mle':
            self.loss_function = MaxLogLike()
        elif self.loss_type == 'ls':
            self.loss_function = LeastSquare()
        elif self.loss_type == 'entropy':
            self.loss_function = CrossEntropy()
        else:
            logger.warning('The loss layer is {}, which is not identified... '.format(self.loss_function))
            logger.warning('Maximum likelihood estimation is applied instead.')
            self.loss_function = MaxLogLike()
        # self.print_info()

    # ... (lines 48-135 omitted)
    def validation(self, dataloader, use_cuda):
        """
        Compute the avaraged loss per event of a generalized Hawkes process
        given observed sequences and current model
        :param dataloader: a pytorch batch-based data loader
        :param use_cuda: use cuda (true) or not (false)
        """
        device = torch.device('cuda:0' if use_cuda else 'cpu')
        self.lambda_model.to(device)
        self.lambda_model.eval()

        Cs = torch.LongTensor(list(range(len(dataloader.dataset.database['type2idx']))))
        Cs = Cs.view(-1, 1)
        Cs = Cs.to(device)

        if dataloader.dataset.database['event_features'] is not None:
            all_event_feature = torch.from_numpy(dataloader.dataset.database['event_features'])
            FCs = all_event_feature.type(torch.FloatTensor)
            FCs = torch.t(FCs)    # (num_type, dim_features)
            FCs = FCs.to(device)
        else:
            FCs = None

        start = time.time()
        loss = 0
        for batch_idx, samples in enumerate(dataloader):
            ci, batch_dict = samples2dict(samples, device, Cs, FCs)
            lambda_t, Lambda_t = self.lambda_model(batch_dict)
            loss += self.loss_function(lambda_t, Lambda_t, ci).item()

            # display training processes
            if batch_idx % 100 == 0:
                logger.info('Validation [{}/{} ({:.0f}%)]\t Time={:.2f}sec.'.format(
                    batch_idx * ci.size(0), len(dataloader.dataset),
                    100. * batch_idx / len(dataloader), time.time() - start))
        return loss/len(dataloader.dataset)

# ... (lines 173-459 omitted)
