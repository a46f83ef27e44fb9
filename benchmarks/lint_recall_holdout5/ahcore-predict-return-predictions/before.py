# Source: https://github.com/NKI-AI/ahcore/blob/21d9f742df2a23db122795a3faffd4e682eac76d/ahcore/entrypoints.py
# Adapted excerpt, before the fix https://github.com/NKI-AI/ahcore/commit/b6315f5d5919cc4a8b03167ee56905baf38396f4
# (trimmed to the code the fix touches; omitted lines are marked).
"""
Entrypoints
"""
from __future__ import annotations

import os
import pathlib
from pprint import pformat

import hydra
import torch
from omegaconf import DictConfig
from pytorch_lightning import Callback, LightningDataModule, LightningModule, Trainer, seed_everything
from pytorch_lightning.loggers import Logger
from torch import nn

from ahcore.utils.data import DataDescription
from ahcore.utils.io import get_logger, log_hyperparameters

logger = get_logger(__name__)


# ... (lines 23-186 omitted)
def inference(config: DictConfig) -> None:
    """Contains the inference pipeline.
    Arguments
    ---------
    config : DictConfig
        Configuration composed by Hydra.

    Returns
    -------
    None
    """

    # Set seed for random number generators in pytorch, numpy and python.random
    if config.get("seed"):
        seed_everything(config.seed, workers=True)

    # Convert relative ckpt path to absolute path if necessary
    checkpoint_path = config.get("ckpt_path")
    if not checkpoint_path:
        raise RuntimeError("No checkpoint inputted in config.ckpt_path")
    if checkpoint_path and not os.path.isabs(checkpoint_path):
        config.trainer.resume_from_checkpoint = pathlib.Path(hydra.utils.get_original_cwd()) / checkpoint_path

    data_description, datamodule = create_datamodule(config)

    # Init augmentations
    augmentations: dict[str, nn.Module] | None = None
    if "augmentations" in config:
        augmentations = {}
        for stage in config.augmentations:
            if not config.augmentations[stage].get("_target_"):
                raise NotImplementedError(f"No augmentations target found in <{config.augmentations[stage]}>")
            logger.info(f"Instantiating {stage} augmentations <{config.augmentations[stage]._target_}>")  # noqa
            augmentations[stage] = hydra.utils.instantiate(
                config.augmentations[stage],
                data_description=data_description,
                data_module=datamodule,
                _convert_="object",
            )
    # Init lightning model
    if not config.lit_module.get("_target_"):
        raise NotImplementedError(f"No model target found in <{config.lit_module}>")
    logger.info(f"Instantiating model <{config.lit_module._target_}>")  # noqa
    model: LightningModule = hydra.utils.instantiate(
        config.lit_module,
        augmentations=augmentations,
        data_description=data_description,
        _convert_="partial",
    )

    # Load checkpoint weights
    lit_ckpt = torch.load(config.ckpt_path)
    model.load_state_dict(lit_ckpt["state_dict"], strict=True)

    # Init lightning callbacks
    callbacks: list[Callback] = []
    if "callbacks" in config:
        for _, cb_conf in config.callbacks.items():
            if "_target_" in cb_conf:
                logger.info("Instantiating callback <%s>", cb_conf._target_)  # noqa
                callbacks.append(hydra.utils.instantiate(cb_conf))

    # Init lightning loggers
    lightning_loggers: list[Logger] = []
    if "logger" in config:
        for _, lg_conf in config.logger.items():
            if "_target_" in lg_conf:
                logger.info("Instantiating logger <%s>", lg_conf._target_)  # noqa
                lightning_loggers.append(hydra.utils.instantiate(lg_conf))

    # Init lightning trainer
    if config.trainer.get("_target_"):
        logger.info("Instantiating trainer <%s>", str(config.trainer._target_))
        trainer: Trainer = hydra.utils.instantiate(
            config.trainer,
            callbacks=callbacks,
            logger=lightning_loggers,
            _convert_="partial",
        )
    else:
        raise NotImplementedError(f"No trainer target found in <{config.trainer}>")

    # Inference
    logger.info("Starting inference...")
    trainer.predict(model=model, datamodule=datamodule)

    # Make sure everything closed properly
    logger.info("Finalizing...")
