# Source: https://github.com/thuanz123/enhancing-transformers/blob/21fe3c9cb6c81e387f1f9a7bcd518b9886b70af9/enhancing/modules/stage2/transformer.py
# Adapted excerpt, before the fix https://github.com/thuanz123/enhancing-transformers/commit/e49a4b3cbd2b29adce1615cd50f5417530635672
# (trimmed to the code the fix touches; omitted lines are marked).
# ------------------------------------------------------------------------------------
# Enhancing Transformers
# Copyright (c) 2022 Thuan H. Nguyen. All Rights Reserved.
# Licensed under the MIT License [see LICENSE for details]
# ------------------------------------------------------------------------------------
# Modified from Taming Transformers (https://github.com/CompVis/taming-transformers)
# Copyright (c) 2020 Patrick Esser and Robin Rombach and Björn Ommer. All Rights Reserved.
# ------------------------------------------------------------------------------------

from typing import Optional, Tuple, Dict, Union, Any
from omegaconf import OmegaConf

import torch
import torch.nn as nn
from torch.optim import lr_scheduler
import torch.nn.functional as F
import pytorch_lightning as pl

from .layers import *
from ...utils.general import initialize_from_config


class CondTransformer(pl.LightningModule):
    def __init__(self, cond_key: str, cond: OmegaConf, stage1: OmegaConf, transformer: OmegaConf,
                 path: Optional[str] = None, ignore_keys: List[str] = list(),
                 code_shape: List[int] = None, scheduler: Optional[OmegaConf] = None) -> None:
        super().__init__()
        
        # get condition key, code shape and scheduler
        self.cond_key = cond_key
        self.code_shape = code_shape
        self.scheduler = scheduler

        # load condition model
        self.cond_model = initialize_from_config(cond)
        
        # load stage1 model
        self.stage1_model = initialize_from_config(stage1)
        
        # load transformer
        self.transformer = initialize_from_config(transformer)

        # make the parameters in stage1 model not trainable
        self.stage1_model.eval()
        for p in self.stage1_model.parameters():
            p.requires_grad = False

        # make the parameters in condition model not trainable
        self.cond_model.eval()
        for p in self.cond_model.parameters():
            p.requires_grad = False

        if path is not None:
            self.init_from_ckpt(path, ignore_keys)

    def forward(self,
                codes: torch.LongTensor,
                conds: torch.LongTensor) -> Tuple[torch.FloatTensor, torch.FloatTensor]:
        
        conds = conds.view(conds.shape[0], -1)
        logits = self.transformer(codes, conds)

        codes = codes.view(-1, codes.shape[-1])
            
        return logits, codes

    def init_from_ckpt(self, path: str, ignore_keys: List[str] = list()):
        sd = torch.load(path, map_location="cpu")["state_dict"]
        keys = list(sd.keys())
        for k in keys:
            for ik in ignore_keys:
                if k.startswith(ik):
                    print("Deleting key {} from state_dict.".format(k))
                    del sd[k]
        self.load_state_dict(sd, strict=False)
        print(f"Restored from {path}")

    def sample(self,
               conds: torch.LongTensor,
               top_k: Optional[float] = None,
               top_p: Optional[float] = None,
               softmax_temperature: float = 1.0,
               use_fp16: bool = True,
               return_pixels: bool = False) -> Union[torch.FloatTensor, Tuple[torch.FloatTensor, torch.LongTensor]]:

        conds = conds.view(conds.shape[0], -1)
        logits, codes = self.transformer.sample(conds=conds, top_k=top_k, top_p=top_p,
                                                softmax_temperature=softmax_temperature,
                                                use_fp16=use_fp16)

        if return_pixels:
            if self.code_shape is not None:
                codes = codes.view(codes.shape[0], *self.code_shape)
                
            return self.stage1_model.decode_codes(codes).clamp(0, 1)
        else:
            codes = codes.view(-1, codes.shape[-1])
            
            return logits, codes

    def get_input(self, batch: Tuple[Any, Any], key: str) -> torch.FloatTensor:
        x = batch[key]

        if len(x.shape) == 3:
            x = x[..., None]
        if x.dtype == torch.double:
            x = x.float()

        return x.contiguous()

    def shared_step(self, batch: Tuple[Any, Any], batch_idx: int) -> torch.FloatTensor:
        images = self.get_input(batch, self.stage1_model.image_key)
        conds = self.get_input(batch, self.cond_key)

        codes = self.stage1_model.encode_codes(images).detach()
        conds = self.cond_model.encode_codes(conds).detach()
        
        logits, codes = self(codes, conds) # if torch.bernoulli(self.sample_prob) else self.sampling(conds) # scheduled sampling
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), codes.view(-1))

        return loss

    def training_step(self, batch: Tuple[Any, Any], batch_idx: int, optimizer_idx: int = 0) -> torch.FloatTensor:
        loss = self.shared_step(batch, batch_idx)
        self.log("train/total_loss", loss, on_step=True, on_epoch=True, prog_bar=True, logger=True)

        return loss

    def validation_step(self, batch: Tuple[Any, Any], batch_idx: int) -> torch.FloatTensor:
        loss = self.shared_step(batch, batch_idx)
        self.log("val/total_loss", loss, on_step=True, on_epoch=True, prog_bar=True, logger=True)

        return loss

    ...  # (lines 135-195 omitted)
    
    def log_images(self, batch: Tuple[Any, Any], *args, **kwargs) -> Dict:
        log = dict()
        
        conds = self.get_input(batch, self.cond_key).to(self.device)
        cond_codes = self.cond_model.encode_codes(conds).detach()
        
        log["conditions"] = self.cond_model.to_img(conds)
        log["first samples"] = self.sample(cond_codes, return_pixels=True)
        log["second samples"] = self.sample(cond_codes, return_pixels=True)
        
        return log
