# Source: https://github.com/mravanelli/pytorch-kaldi/blob/0c594542224ed5d228333068cb5c8438b4f47064/run_nn.py
# Adapted excerpt, before the fix https://github.com/mravanelli/pytorch-kaldi/commit/bd8c2f2f1c31984130102191fd274e19c32b9030
# (trimmed to the code the fix touches; omitted lines are marked).
##########################################################
# pytorch-kaldi v.0.1                                      
# Mirco Ravanelli, Titouan Parcollet
# Mila, University of Montreal
# October 2018
##########################################################

import sys
import configparser
import os
from utils import read_args_command_line,dict_fea_lab_arch,is_sequential_dict,compute_cw_max,model_init,optimizer_init,forward_model,progress
from data_io import load_counts,read_lab_fea
import numpy as np
import random
import torch
from distutils.util import strtobool
import time
from scipy.ndimage.interpolation import shift
import kaldi_io

# ... (lines 21-54 omitted)
multi_gpu=strtobool(config['exp']['multi_gpu'])
is_production=strtobool(config['exp']['production'])

to_do=config['exp']['to_do']
info_file=config['exp']['out_info']

model=config['model']['model'].split('\n')

forward_outs=config['forward']['forward_out'].split(',')
forward_normalize_post=list(map(strtobool,config['forward']['normalize_posteriors'].split(',')))
forward_count_files=config['forward']['normalize_with_counts_from'].split(',')
require_decodings=list(map(strtobool,config['forward']['require_decoding'].split(',')))

if to_do=='train':
    max_seq_length=int(config['batches']['max_seq_length_train']) #*(int(info_file[-13:-10])+1) # increasing over the epochs
    batch_size=int(config['batches']['batch_size_train'])

if to_do=='valid':
    max_seq_length=int(config['batches']['max_seq_length_valid'])
    batch_size=int(config['batches']['batch_size_valid'])

if to_do=='forward':
    max_seq_length=-1 # do to break forward sentences
    batch_size=1
    
    
# ... (lines 81-104 omitted)

# Reading model and initialize networks
inp_out_dict=fea_dict

[nns,costs]=model_init(inp_out_dict,model,config,arch_dict,use_cuda,multi_gpu,to_do)
   
# optimizers initialization
optimizers=optimizer_init(nns,config,arch_dict)
       
# ... (lines 114-138 omitted)
# ***** Minibatch Processing loop********
if seq_model or to_do=='forward':
    N_snt=len(data_name)
    N_batches=int(N_snt/batch_size)
else:
    N_ex_tr=data_set.shape[0]
    N_batches=int(N_ex_tr/batch_size)
    

beg_batch=0
end_batch=batch_size 

snt_index=0
beg_snt=0 


start_time = time.time()

# array of sentence lengths
arr_snt_len=shift(shift(data_end_index, -1)-data_end_index,1)
arr_snt_len[0]=data_end_index[0]


loss_sum=0
err_sum=0

inp_dim=data_set.shape[1]

for i in range(N_batches):   
    
    max_len=0

    if seq_model:
     
     max_len=int(max(arr_snt_len[snt_index:snt_index+batch_size]))  
     inp= torch.zeros(max_len,batch_size,inp_dim).contiguous()

        
     for k in range(batch_size):
          
              snt_len=data_end_index[snt_index]-beg_snt
              N_zeros=max_len-snt_len
              
              # Appending a random number of initial zeros, tge others are at the end. 
              N_zeros_left=random.randint(0,N_zeros)
             
              # randomizing could have a regularization effect
              inp[N_zeros_left:N_zeros_left+snt_len,k,:]=data_set[beg_snt:beg_snt+snt_len,:]
              
              beg_snt=data_end_index[snt_index]
              snt_index=snt_index+1
            
    else:
        # features and labels for batch i
        if to_do!='forward':
            inp= data_set[beg_batch:end_batch,:].contiguous()
        else:
            snt_len=data_end_index[snt_index]-beg_snt
            inp= data_set[beg_snt:beg_snt+snt_len,:].contiguous()
            beg_snt=data_end_index[snt_index]
            snt_index=snt_index+1

        
    # use cuda
    if use_cuda:
        inp=inp.cuda()
   
    # Forward input
    outs_dict=forward_model(fea_dict,lab_dict,arch_dict,model,nns,costs,inp,inp_out_dict,max_len,batch_size,to_do,forward_outs)
        


    if to_do=='train':
        
        for opt in optimizers.keys():
            optimizers[opt].zero_grad()
            

        outs_dict['loss_final'].backward()
        
        # Gradient Clipping (th 0.1)
        #for net in nns.keys():
        #    torch.nn.utils.clip_grad_norm_(nns[net].parameters(), 0.1)
        
        
        for opt in optimizers.keys():
            if not(strtobool(config[arch_dict[opt][0]]['arch_freeze'])):
                optimizers[opt].step()
                
    if to_do=='forward':
        for out_id in range(len(forward_outs)):
            
            out_save=outs_dict[forward_outs[out_id]].data.cpu().numpy()
            
            if forward_normalize_post[out_id]:
                # read the config file
                counts = load_counts(forward_count_files[out_id])
                out_save=out_save-np.log(counts/np.sum(counts))             
                
            # save the output    
            kaldi_io.write_mat(post_file[forward_outs[out_id]], out_save, data_name[i])
    else:
        loss_sum=loss_sum+outs_dict['loss_final'].detach()
        err_sum=err_sum+outs_dict['err_final'].detach()
       
    # update it to the next batch 
    beg_batch=end_batch
    end_batch=beg_batch+batch_size
    
    # Progress bar
    if to_do == 'train':
      status_string="Training | (Batch "+str(i+1)+"/"+str(N_batches)+")"
    if to_do == 'valid':
      status_string="Validating | (Batch "+str(i+1)+"/"+str(N_batches)+")"
    if to_do == 'forward':
      status_string="Forwarding | (Batch "+str(i+1)+"/"+str(N_batches)+")"
      
    progress(i, N_batches, status=status_string)

elapsed_time_chunk=time.time() - start_time 

loss_tot=loss_sum/N_batches
err_tot=err_sum/N_batches

# ... (lines 263-293 omitted)
