# Source: https://github.com/jurgisp/pydreamer/blob/0497d0641156bba02289a87fc63748b89ac8ce2f/train_offline.py
# Adapted excerpt, before the fix https://github.com/jurgisp/pydreamer/commit/b6d9c6c15e15f6f0a89d8666b75beae16e3a7994
# (trimmed to the code the fix touches; omitted lines are marked).
import argparse
import pathlib
from collections import defaultdict
import numpy as np
import time
import torch
import torch.nn as nn
import torch.distributions as D
import mlflow

import tools
from tools import mlflow_start_or_resume
from data import OfflineDataSequential, OfflineDataRandom
from preprocessing import MinigridPreprocess
from models import VAE, RSSM
from modules import ConvEncoder, ConvDecoderCat, DenseDecoder


def run(conf):
    assert not(conf.keep_state and not conf.data_seq), "Should train sequentially if keeping state"

    mlflow_start_or_resume(conf.run_name, conf.resume_id)
    mlflow.log_params(vars(conf))
    device = torch.device(conf.device)
    # ... (lines 25-66 omitted)
    eval_iter = data_eval.iterate(conf.batch_length, 1000)
    eval_iter_full = data_eval.iterate(500, 100)

    start_time = time.time()
    metrics = defaultdict(list)
    steps = resume_step or 0
    grad_norm = None
    persist_state = None
    
    for batch in data.iterate(conf.batch_length, conf.batch_size):

        image, action, reset, map = preprocess(batch)
        if persist_state is None and conf.keep_state:
            persist_state = model.init_state(image.size(1))

        # Predict

        state = persist_state if conf.keep_state else model.init_state(image.size(1))
        output = model(image, action, reset, state)
        loss, loss_metrics, loss_tensors = model.loss(*output, image, map)
        persist_state = output[-1][-1].detach()

        # ... (lines 89-169 omitted)
        # Evaluate full

        if steps % conf.eval_interval == 0:
            batch = next(eval_iter_full)
            image, action, reset, map = preprocess(batch)
            image_cat = image.argmax(axis=-3)
            print(f'Eval batch: {image.shape}')

            # Sample loss several times and do log E[p(map|state)] = log avg[exp(loss)]
            map_losses = []
            img_losses = []
            image_preds = []
            image_recs = []
            map_recs = []
            metrics_eval = defaultdict(list)
            with tools.Timer('eval_sampling'):
                for _ in range(conf.full_eval_samples):
                    with torch.no_grad():
                        output = model(image, action, reset, model.init_state(image.size(1)))
                        loss, loss_metrics, loss_tensors = model.loss(*output, image, map)
                        image_pred, image_rec, map_rec = model.predict_obs(*output)

                    map_losses.append(map_rec.log_prob(map).sum(dim=[-1, -2]))          # Keep (N,B) dim
                    img_losses.append(image_pred.log_prob(image_cat).sum(dim=[-1, -2]))
                    for k, v in loss_metrics.items():
                        metrics_eval[k].append(v.item())
                    image_preds.append(image_pred)
                    image_recs.append(image_rec)
                    map_recs.append(map_rec)
                    # TODO: loss_tensors should be aggregated too

            metrics_eval = {f'eval_full/{k}': np.mean(v) for k, v in metrics_eval.items()}

            map_losses = torch.stack(map_losses)  # (S,N,B)
            img_losses = torch.stack(img_losses)
            map_losses_exp = torch.logsumexp(map_losses, dim=0) - np.log(conf.full_eval_samples)  # log avg[exp(loss)] = log sum[exp(loss)] - log(S)
            img_losses_exp = torch.logsumexp(img_losses, dim=0) - np.log(conf.full_eval_samples)  # log avg[exp(loss)] = log sum[exp(loss)] - log(S)
            metrics_eval['eval_full/loss_map_exp'] = -map_losses_exp.mean().item()
            metrics_eval['eval_full/loss_image_pred_exp'] = -img_losses_exp.mean().item()

            image_pred = D.Categorical(probs=torch.mean(torch.stack([p.probs for p in image_preds]), axis=0))  # Average image predictions over samples
            image_rec = D.Categorical(probs=torch.mean(torch.stack([p.probs for p in image_recs]), axis=0))
            map_rec = D.Categorical(probs=torch.mean(torch.stack([p.probs for p in map_recs]), axis=0))

            mlflow.log_metrics(metrics_eval, step=steps)
            log_batch_npz(batch, loss_tensors, image_pred, image_rec, map_rec, top=10, subdir='d2_wm_predict_eval')  

# ... (lines 217-235 omitted)
