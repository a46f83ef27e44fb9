# Source: https://github.com/RUCAIBox/TextBox/blob/dc0a4a3566cab25f2ec6d5eb9164b63f47d80d7f/textbox/trainer/trainer.py
# Adapted excerpt, before the fix https://github.com/RUCAIBox/TextBox/commit/a5a04db56845f771c5dd6ee442fa901108b860e0
# (trimmed to the code the fix touches; omitted lines are marked).
import collections
import os
from logging import getLogger
from typing import Optional, Union, List, Dict

import torch
import torch.optim as optim
import transformers
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.utils.data import DataLoader
from tqdm import tqdm

from textbox import Config
from textbox.utils.dashboard import get_dashboard, Timestamp, EpochTracker
from .scheduler import (
    AbstractScheduler, InverseSquareRootScheduler, CosineScheduler, LinearScheduler, ConstantScheduler
)
from torch.utils.data import DataLoader
from ..evaluator import BaseEvaluator
from ..model.abstract_model import AbstractModel
from ..utils import ensure_dir, serialized_save, init_seed


# ... (lines 25-48 omitted)
class Trainer(AbstractTrainer):
    r"""The basic Trainer for basic training and evaluation strategies in text generation systems.

    This class defines common functions for training and evaluation processes of most text generation system models,
    including `fit()`, `evaluate()`, `resume_checkpoint()` and some other features helpful for model training and
    evaluation.

    Generally speaking, this class can serve most text generation system models, If the training process of the model
    is to simply optimize a single loss without involving any complex training strategies, such as adversarial learning,
    pre-training and so on.

    Initializing the Trainer needs two parameters: `config` and `model`. `config` records the parameters' information
    for controlling training and evaluation, such as `learning_rate`, `epochs` and so on.
    More information can be found in [placeholder]. `model` is the instantiated object of a Model Class.
    """

    # ... (lines 65-464 omitted)
    @torch.no_grad()
    def evaluate(
        self,
        eval_data: DataLoader,
        load_best_model: bool = True,
        model_file: Optional[str] = None,
        is_valid: bool = False,
    ) -> Optional[dict]:
        r"""Evaluate the model based on the `eval_data`.

        Args:
            eval_data (DataLoader): the eval data
            load_best_model (bool, optional): whether load the best model in the training process, default: True.
                                              It should be set True, if users want to test the model after training.
            model_file (str, optional): the saved model file, default: None. If users want to test the previously
                                        trained model file, they can set this parameter.
            is_valid: (default = False) True if evaluate during validation

        Returns:
            dict: eval result, key is the eval metric and value in the corresponding metric value
        """
        if is_valid:
            load_best_model = False

        if load_best_model:
            checkpoint_file = model_file or self.saved_model_filename + '.pth'
            if not os.path.isfile(checkpoint_file):
                self.logger.error(
                    f'Failed to evaluate model: "{checkpoint_file}" not found. '
                    f'(You may specify it with `load_experiment`)'
                )
                return None
            self.logger.info('Loading model structure and parameters from {} ...'.format(checkpoint_file))
            checkpoint = torch.load(checkpoint_file, map_location=self.device)
            self.model.load_state_dict(checkpoint['state_dict'])
            self.accelerator.wait_for_everyone()

        if not is_valid:
            self.model = self.accelerator.prepare(self.model)

        self.model.eval()

        if self.config['dataset'] == 'multiwoz':
            self.evaluator.evaluators[0].load_data('valid' if is_valid else 'test')
            turn_domains = self.evaluator.evaluators[0].turn_domains

        # generate
        generate_corpus = []
        eval_tqdm = tqdm(eval_data, desc="generating", dynamic_ncols=True) if not self.disable_tqdm else eval_data
        for i, batch_data in enumerate(eval_tqdm):
            if self.config['dataset'] != 'multiwoz':
                generated = self.accelerator.unwrap_model(self.model).generate(batch_data, self.accelerator)
            else:
                batch_size = batch_data['source_ids'].size(0)
                idx_mask = torch.zeros(batch_size).to(self.device).bool()
                idx_mask[::3] = 1
                bs_batch = {}
                bs_batch['source_ids'] = batch_data['source_ids'][idx_mask]
                bs_batch['source_mask'] = batch_data['source_mask'][idx_mask]
                asrs_batch = {}
                asrs_batch['source_ids'] = batch_data['source_ids'][~idx_mask]
                asrs_batch['source_mask'] = batch_data['source_mask'][~idx_mask]
                bs_outputs = self.accelerator.unwrap_model(self.model).generate(bs_batch, self.accelerator)

                batch_size //= 3
                db_texts = [
                    self.evaluator.evaluators[0].span_db(bs, td)
                    for bs, td in zip(bs_outputs, turn_domains[i * batch_size:(i + 1) * batch_size])
                ]
                db_ids = torch.tensor(self.model.tokenizer.convert_tokens_to_ids(db_texts)).long()
                db_ids = db_ids.repeat_interleave(2).to(self.device)
                db_idx = torch.eq(asrs_batch['source_ids'], self.model.tokenizer.convert_tokens_to_ids('[db_nores]'))
                asrs_batch['source_ids'][db_idx] = db_ids
                asrs_outputs = self.accelerator.unwrap_model(self.model).generate(asrs_batch, self.accelerator)
                generated = sum([[bs, aspn, rs]
                                 for bs, aspn, rs in zip(bs_outputs, asrs_outputs[::2], asrs_outputs[1::2])], [])

            generate_corpus.extend(generated)

        corpus_len = len(eval_data.dataset.target_text)
        reference_dataset = eval_data.dataset
        generate_corpus = generate_corpus[:corpus_len]

        if self.post_processing == 'paraphrase':
            for i, gen in enumerate(generate_corpus):
                if gen.find('<sep>') >= 0:
                    gen = gen.split('<sep>')[1].strip()
                else:
                    last = max(gen.rfind('('), gen.rfind(')'))
                    last = gen.find(' ', last)
                    gen = gen[last:].strip()
                generate_corpus[i] = gen

        if self.is_save():
            self.save_generated_text(generate_corpus, is_valid)

        result = self.evaluator.evaluate(generate_corpus, reference_dataset)

        return result
