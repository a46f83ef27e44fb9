# Source: https://github.com/santi-pdp/pase/blob/383dc812ff9ecb8b009615128be9f13ea24cf112/ASR/run_TIMIT_fast.py
# Adapted excerpt, before the fix https://github.com/santi-pdp/pase/commit/371a2b6e73e47cc4c3be0bdb5d4418e83c325712
# (trimmed to the code the fix touches; omitted lines are marked).
# Mirco Ravanelli
# Mila, June 2019

# This script runs a simple speech recognition experiment on the top of PASE features. 
# The results are reported in terms of Frame Error Rate over phonemes (context-independent). 
# This system is not designed for an extensive evaluation of PASE features, but mainly for quickly monitoring the performance of PASE during the self-supervised training phase.
# The results are printed in standard output and within the text file specified in the last argument.

# To run it:
# python run_TIMIT_fast.py ../cfg/PASE.cfg ../PASE.ckpt /home/mirco/Dataset/TIMIT  TIMIT_asr_exp.res
#
# To run the experiment with the noisy and reverberated version of TIMIT, just change the data folder with the one containing TIMIT_rev_noise.

import warnings
warnings.filterwarnings("ignore")

import librosa

import os
import sys
from neural_networks import MLP,context_window
import torch
import numpy as np
import torch.nn as nn
import torch.optim as optim
import pickle
from pase.models.frontend import wf_builder
# from waveminionet.models.frontend import wf_builder #old models
import soundfile as sf
import os
import json
# import pase.models as models
# import models.WorkerScheduler
from pase.models.WorkerScheduler.encoder import *


def get_freer_gpu(trials=10):
    for j in range(trials):
         os.system('nvidia-smi -q -d Memory |grep -A4 GPU|grep Free >tmp')
         memory_available = [int(x.split()[2]) for x in open('tmp', 'r').readlines()]
         dev_ = torch.device('cuda:'+str(np.argmax(memory_available)))
         try:
            a = torch.rand(1).cuda(dev_)
            return dev_
         except: 
            pass
            print('NO GPU AVAILABLE!!!')
            exit(1)


pase_cfg=sys.argv[1] # e.g, '../cfg/PASE.cfg'
pase_model=sys.argv[2] # e.g, '../PASE.ckpt'
data_folder=sys.argv[3] # e.g., '/home/mirco/Dataset/TIMIT'
output_file=sys.argv[4] # e.g., 'TIMIT_asr_exp.res'


# Label files for TIMIT
lab_file='TIMIT_lab_mono.pkl'
lab_file_dev='TIMIT_lab_mono_dev.pkl'

# File list for TIMIT
tr_lst_file='timit_tr.lst'
dev_lst_file='timit_dev.lst'

tr_lst = [line.rstrip('\n') for line in open(tr_lst_file)]
dev_lst = [line.rstrip('\n') for line in open(dev_lst_file)]

# Training parameters
N_epochs=24
seed=1234
batch_size=128
halving_factor=0.5
lr=0.0012
left=1
right=1

# Neural network parameters
options={}
options['dnn_lay']='1024,48'
options['dnn_drop']='0.15,0.0'
options['dnn_use_batchnorm']='False,False'
options['dnn_use_laynorm']='True,False'
options['dnn_use_laynorm_inp']='True'
options['dnn_use_batchnorm_inp']='False'
options['dnn_act']='relu,softmax'

device=0 #get_freer_gpu()


# folder creation
text_file=open(output_file, "w")

# Loading pase
pase =wf_builder(pase_cfg)
pase.load_pretrained(pase_model, load_last=True, verbose=False)
pase.to(device)
pase.eval()

# reading the training signals
print("Waveform reading...")
fea={}
for wav_file in tr_lst:
    [signal, fs] = sf.read(data_folder+'/'+wav_file)
    signal=signal/np.max(np.abs(signal))
    signal = signal.astype(np.float32)
    
    fea_id=wav_file.split('/')[-2]+'_'+wav_file.split('/')[-1].split('.')[0]
    fea[fea_id]=torch.from_numpy(signal).float().to(device).view(1,1,-1)


# reading the dev signals
fea_dev={}
for wav_file in dev_lst:
    [signal, fs] = sf.read(data_folder+'/'+wav_file)
    signal=signal/np.max(np.abs(signal))
    fea_id=wav_file.split('/')[-2]+'_'+wav_file.split('/')[-1].split('.')[0]
    fea_dev[fea_id]=torch.from_numpy(signal).float().to(device).view(1,1,-1)


# Computing pase features for training
print('Computing PASE features...')
fea_pase={}
for snt_id in fea.keys():
    pase.eval()
    fea_pase[snt_id]=pase(fea[snt_id], device,mode='avg_norm').to('cpu').detach()
    fea_pase[snt_id]=fea_pase[snt_id].view(fea_pase[snt_id].shape[1],fea_pase[snt_id].shape[2]).transpose(0,1)

inp_dim=fea_pase[snt_id].shape[1]*(left+right+1)

# Computing pase features for test
fea_pase_dev={}
for snt_id in fea_dev.keys():
    fea_pase_dev[snt_id]=pase(fea_dev[snt_id], device, mode='avg_norm').to('cpu').detach()
    fea_pase_dev[snt_id]=fea_pase_dev[snt_id].view(fea_pase_dev[snt_id].shape[1],fea_pase_dev[snt_id].shape[2]).transpose(0,1)

  
# Label file reading
with open(lab_file, 'rb') as handle:
    lab = pickle.load(handle)

# ... (lines 141-357 omitted)
