# Source: https://github.com/UCSD-E4E/acoustic-multiclass-training/blob/3c8552af51b9c0fd4f17c8688c7907d9197baac2/classification/train.py
# Adapted excerpt, after the fix https://github.com/UCSD-E4E/acoustic-multiclass-training/commit/3c8552af51b9c0fd4f17c8688c7907d9197baac2
# (trimmed to the code the fix touches; omitted lines are marked).
# pylint: disable=R0902
# pylint: disable=W0621
# pylint: disable=R0913
# pylint: disable=E1121
# R0902, W0621 -> Not redefining these values, they are all the same value,
# R0913, E1121 -> These functions just have a lot of args that are frequently changed since ML

"""
    Contains the training and validation function and logging to Weights and Biases
    Methods:
        train: trains the model
        valid: calculates validation loss and accuracy
        set_seed: sets the random seed
        init_wandb: initializes the Weights and Biases logging
        

"""
from typing import Dict, Any, Tuple
import os
import datetime
from torchmetrics.classification import MultilabelAveragePrecision

import torch
import torch.nn.functional as F
from torch.optim import Adam
from torch.amp import autocast
import numpy as np
from dataset import PyhaDF_Dataset, get_datasets
from model import TimmModel
from utils import set_seed, print_verbose
from config import get_config
from tqdm import tqdm
import wandb



tqdm.pandas()
time_now  = datetime.datetime.now().strftime('%Y%m%d-%H%M') 
device = 'cuda' if torch.cuda.is_available() else 'cpu'
wandb_run = None

def check_shape(outputs, labels):
    """ 
    Checks to make sure the output is the same
    """
    if outputs.shape != labels.shape:
        print(outputs.shape)
        print(labels.shape)
        raise RuntimeError("Shape diff between output of models and labels, see above and debug")



# Splitting this up would be annoying!!!
# pylint: disable=too-many-statements 
        ...  # (lines 55-152 omitted)
        if (i != 0 and i % (CONFIG.valid_freq) == 0):
            valid_start_time = datetime.datetime.now()
            _, _, best_valid_cmap = valid(model, valid_loader, epoch + i / len(data_loader), best_valid_cmap, CONFIG)
            # Ignore the time it takes to validate in annotations/sec
            start_time += datetime.datetime.now() - valid_start_time
    return running_loss/len(data_loader), best_valid_cmap


def valid(model: Any,
          data_loader: PyhaDF_Dataset,
          epoch: int,
          best_valid_cmap: float,
          CONFIG) -> Tuple[float, float]:
    """
    Run a validation loop
    """
    model.eval()
    
    running_loss = 0
    pred = []
    label = []
    
    # tqdm is a progress bar
    dl = tqdm(data_loader, position=5)
    
    if CONFIG.map_debug and CONFIG.model_checkpoint is not None:
        pred = torch.load("/".join(CONFIG.model_checkpoint.split('/')[:-1]) + '/pred.pt')
        label = torch.load("/".join(CONFIG.model_checkpoint.split('/')[:-1]) + '/label.pt')
    else:
        with torch.no_grad():
            for _, (mels, labels) in enumerate(dl):
                mels = mels.to(device)
                labels = labels.to(device)
                
                # argmax
                outputs = model(mels)
                check_shape(outputs, labels)
                
                loss = model.loss_fn(outputs, labels)
                    
                running_loss += loss.item()
                
                pred.append(outputs.cpu().detach())
                label.append(labels.cpu().detach())

            pred = torch.cat(pred)
            label = torch.cat(label)
            if CONFIG.map_debug and CONFIG.model_checkpoint is not None:
                torch.save(pred, "/".join(CONFIG.model_checkpoint.split('/')[:-1]) + '/pred.pt')
                torch.save(label, "/".join(CONFIG.model_checkpoint.split('/')[:-1]) + '/label.pt')

    # softmax predictions
    pred = F.softmax(pred).to(device)

    metric = MultilabelAveragePrecision(num_labels=model.num_classes, average="macro")
    valid_map = metric(pred.detach().cpu(), label.detach().cpu().long())
    
    # Log to Weights and Biases
    wandb.log({
        "valid/loss": running_loss/len(data_loader),
        "valid/map": valid_map,
        "epoch_progress": epoch,
    })

    print(f"Validation Loss:\t{running_loss/len(data_loader)} \n Validation mAP:\t{valid_map}" )
    if valid_map > best_valid_cmap:
        path = os.path.join("models",wandb_run.name + '.pt')
        if not os.path.exists("models"):
            os.mkdir("models")
        torch.save(model.state_dict(), path)
        print("Model saved in:", path)
        print(f"Validation cmAP Improved - {best_valid_cmap} ---> {valid_map}")
        best_valid_cmap = valid_map

    
    return running_loss/len(data_loader), valid_map, best_valid_cmap


# ... (lines 231-318 omitted)
