# Source: https://github.com/thuanz123/enhancing-transformers/blob/21fe3c9cb6c81e387f1f9a7bcd518b9886b70af9/enhancing/modules/stage2/layers.py
# Adapted excerpt, context file at the parent of https://github.com/thuanz123/enhancing-transformers/commit/e49a4b3cbd2b29adce1615cd50f5417530635672 (the fix also changed one line of GPT.sample_step here; this is the parent version)
# (trimmed to the code the fix touches; omitted lines are marked).
# ... (lines 1-12 omitted)
import math
from omegaconf import OmegaConf
from typing import Optional, Tuple, List

import torch
import torch.nn as nn
from torch.nn import functional as F
from torch.cuda.amp import autocast

# ... (lines 22-145 omitted)
class GPT(nn.Module):
    def __init__(self,
                 vocab_cond_size: int,
                 vocab_img_size: int,
                 embed_dim: int,
                 cond_num_tokens: int,
                 img_num_tokens: int,
                 n_heads: int,
                 n_layers: int,
                 mlp_bias: bool = True,
                 attn_bias: bool = True) -> None:
        super().__init__()
        self.img_num_tokens = img_num_tokens 
        self.vocab_cond_size = vocab_cond_size
        
        ...  # (lines 161-192 omitted)
    def forward(self,
                codes: torch.LongTensor,
                conds: torch.LongTensor) -> torch.FloatTensor:
        
        codes = codes.view(codes.shape[0], -1)
        codes = self.tok_emb_code(codes)
        conds = self.tok_emb_cond(conds)
        
        codes = codes + self.pos_emb_code
        conds = conds + self.pos_emb_cond

        x = torch.cat([conds, codes], axis=1).contiguous()
        x = self.blocks(x)
        x = self.layer_norm(x)

        x = x[:, conds.shape[1]-1:-1].contiguous()
        logits = self.head(x)
        
        return logits

    def sample(self,
               conds: torch.LongTensor,
               top_k: Optional[float] = None,
               top_p: Optional[float] = None,
               softmax_temperature: float = 1.0,
               use_fp16: bool = True) -> Tuple[torch.FloatTensor, torch.LongTensor]:
        
        past = codes = logits = None
            
        for i in range(self.img_num_tokens):
            if codes is None:
                codes_ = None
                pos_code = None
            else:
                codes_ = codes.clone().detach()
                codes_ = codes_[:, -1:]
                pos_code = self.pos_emb_code[:, i:i+1, :]
                
            logits_, presents = self.sample_step(codes_, conds, pos_code, use_fp16, past)
            
            logits_ = logits_.to(dtype=torch.float32)
            logits_ = logits_ / softmax_temperature

            presents = torch.stack(presents).clone().detach()
            if past is None:
                past = [presents]
            else:
                past.append(presents)

            if top_k is not None:
                v, ix = torch.topk(logits_, top_k)
                logits_[logits_ < v[:, [-1]]] = -float('Inf')
            probs = F.softmax(logits_, dim=-1)
            
            if top_p is not None:
                sorted_probs, sorted_indices = torch.sort(probs, dim=-1, descending=True)
                cum_probs = torch.cumsum(sorted_probs, dim=-1)

                sorted_idx_remove_cond = cum_probs >= p

                sorted_idx_remove_cond[..., 1:] = sorted_idx_remove_cond[..., :-1].clone()
                sorted_idx_remove_cond[..., 0] = 0

                indices_to_remove = sorted_idx_remove_cond.scatter(-1, sorted_indices, sorted_idx_remove_cond)
                probs = probs.masked_fill(indices_to_remove, 0.0)
                probs = probs / torch.sum(probs, dim=-1, keepdim=True)

            idx = torch.multinomial(probs, num_samples=1).clone().detach()
            codes = idx if codes is None else torch.cat([codes, idx], axis=1)
            logits = logits_ if logits is None else torch.cat([logits, logits_], axis=1)

        del past

        return logits, codes

    def sample_step(self,
                    codes: torch.LongTensor,
                    conds: torch.LongTensor,
                    pos_code: torch.LongTensor,
                    use_fp16: bool = True,
                    past: Optional[torch.FloatTensor] = None) -> Tuple[torch.FloatTensor, List[torch.FloatTensor]]:
        
        with autocast(enabled=use_fp16):
            presents = []
            
            if codes is None:
                assert past is None
                conds = self.tok_emb_cond(conds)
                x = conds + self.pos_emb_cond
                
                for i, block in enumerate(self.blocks):
                    x, present = block.sample(x, layer_past=None)
                    presents.append(present)
                x = self.layer_norm(x)
                x = x[:, conds.shape[1]-1].contiguous()
            else:
                assert past is not None
                codes = self.tok_emb_code(codes)
                x = codes + self.pos_emb_code
                
                past = torch.cat(past, dim=-2)
                for i, block in enumerate(self.blocks):
                    x, present = block.sample(x, layer_past= past[i])
                    presents.append(present)

                x = self.layer_norm(x)
                x = x[:, -1].contiguous()

            logits = self.head(x)
            
            return logits, presents

# ... (lines 305-547 omitted)
