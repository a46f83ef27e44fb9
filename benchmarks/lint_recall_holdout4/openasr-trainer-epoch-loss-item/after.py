# Source: https://github.com/by2101/OpenASR/blob/e72937ea99e8e90ae1f405259ab67f527c36e8cb/src/trainer.py
# Adapted excerpt, after the fix https://github.com/by2101/OpenASR/commit/e72937ea99e8e90ae1f405259ab67f527c36e8cb
# (trimmed to the code the fix touches; omitted lines are marked).
# ... (lines 1-15 omitted)
import os
import sys
import time
import logging
import numpy as np
import torch
from torch import nn
from torch.nn.utils import clip_grad_norm_
import torch.nn.init as init
import utils
import schedule
import metric


class Trainer(object):
    def __init__ (self, model, config, tr_loader, cv_loader):
        # ... (lines 32-69 omitted)
        # trainer state
        self.epoch = 0
        self.step = 0
        self.tr_loss = []
        self.cv_loss = []
        self.lr = self.init_lr
        
    # ... (lines 77-98 omitted)
    def training_state(self):
        return {
            "epoch": self.epoch,
            "step": self.step,
            "tr_loss": self.tr_loss,
            "cv_loss": self.cv_loss,
            "lr": self.lr,
            }    


    def restore_training_state(self, state):
        self.epoch = state["epoch"]
        self.step = state["step"]
        self.tr_loss = state["tr_loss"]
        self.cv_loss = state["cv_loss"]
        self.lr = state["lr"]

    # ... (lines 116-138 omitted)
    def train(self): 
        timer = utils.Timer()
        self.best_cvloss = 9e20
        if self.cv_loss:
            self.best_cvloss = min(self.cv_loss)

        if utils.TENSORBOARD_LOGGING == 1:
            self.visualize_figure()

        while self.epoch < self.num_epoch:
            timer.tic()
            self.epoch += 1
            logging.info("Training")
            tr_loss = self.iter_one_epoch()
            tr_msg = ("tr loss: {:.4f}").format(tr_loss)
            msg = "\n" + "-"*85 + "\n"
            msg += "Epoch {} Training Summary:\n{}\n".format(self.epoch, tr_msg)
            msg += "-"*85
            logging.info(msg)
            self.save(os.path.join(self.exp_dir, "ep-{:04d}.pt".format(self.epoch))) 
            self.save(os.path.join(self.exp_dir, "last-ckpt.pt")) 
            logging.info("Validation")
            cv_loss = self.iter_one_epoch(cross_valid=True)

            if self.best_cvloss > cv_loss:
                self.best_cvloss = cv_loss
            train_time = timer.toc()
            cv_msg = ("cv loss: {:.4f} | best cv loss {:.4f}").format(cv_loss, self.best_cvloss)
            msg = "\n" + "-"*85 + "\n"
            msg += "Epoch {} Validation Summary:\n{}\n".format(self.epoch, cv_msg)
            msg += "Time cost: {:.4f} min".format(train_time/60.)
            msg += "\n" + "-"*85 + '\n'
            logging.info(msg)
            if isinstance(self.lr_scheduler, schedule.BobLearningRateSchedule):
                self.lr_scheduler.update_decay_rate(cv_tot_loss/cv_utter_itered)
            self.tr_loss.append(tr_loss)
            self.cv_loss.append(cv_loss)

            if utils.TENSORBOARD_LOGGING == 1:
                utils.visualizer.add_scalar("tr_loss", tr_loss, self.epoch)
                utils.visualizer.add_scalar("cv_loss", cv_loss, self.epoch)
            if self.num_last_ckpt_keep:
                utils.cleanup_ckpt(self.exp_dir, self.num_last_ckpt_keep)


    def iter_one_epoch(self, cross_valid=False):
        niter = 0

        if cross_valid:
            loader = self.cv_loader
            self.model.eval()
        else:
            loader = self.tr_loader
            self.model.train()
        
        timer = utils.Timer()
        timer.tic()
        tot_loss = 0.
        tot_token = 0
        tot_sequence = 0
        tot_err_num = 0.
        tot_ref_num = 0.

        n_accu_batch = self.accumulate_grad_batch   

        loader_iter = iter(loader)
        tot_iter_num = len(loader_iter)
        while True:
            try:
                data = next(loader_iter)
                niter += 1
            except StopIteration:
                break
            (utts, padded_waveforms, wave_lengths, 
                    ids, labels, paddings) = data
            if cross_valid:
                with torch.no_grad():
                    this_loss = self.model(padded_waveforms.cuda(),
                            wave_lengths.cuda(),
                            ids.cuda(), 
                            labels.cuda(),
                            paddings.cuda())
            else:
                this_loss = self.model(padded_waveforms.cuda(),
                        wave_lengths.cuda(),
                        ids.cuda(), 
                        labels.cuda(),
                        paddings.cuda(),
                        label_smooth=self.label_smooth,
                        lst_w=self.lst_w,
                        lst_t=self.lst_t)

            batch_loss = torch.sum(this_loss)
            n_token = torch.sum(1-paddings).float()
            n_sequence = len(utts)

            tot_loss = tot_loss + batch_loss
            tot_token = tot_token + n_token
            tot_sequence = tot_sequence + n_sequence

            self.metric_summarizer.reset_metrics()
            self.metric_summarizer.update_metric("per_token_loss", batch_loss, 1.0/n_token)
            self.metric_summarizer.update_metric("avg_token_loss", tot_loss, 1.0/tot_token)
            self.metric_summarizer.update_metric("learning_rate", list(self.optimizer.param_groups)[0]["lr"], 1.0)
            self.metric_summarizer.update_metric("sequence_per_sec", tot_sequence, 1.0/timer.toc())
            self.metric_summarizer.summarize()

            loss =  self.metric_summarizer.collect_loss()
            loss = loss/self.accumulate_grad_batch
           
            # compute gradients 
            if not cross_valid:
                if n_accu_batch == self.accumulate_grad_batch:
                    self.optimizer.zero_grad()
                loss.backward()
                n_accu_batch -= 1
                if n_accu_batch == 0 or niter == tot_iter_num:
                    self.step += 1  # to be consistant with metric
                    grad_norm = clip_grad_norm_(self.model.parameters(), self.grad_max_norm)
                    self.lr_scheduler.step()   # then, update learning rate
                    self.lr_scheduler.set_lr(self.optimizer, self.init_lr)
                    self.optimizer.step() 
                    n_accu_batch = self.accumulate_grad_batch
                else:
                    continue

            if utils.TENSORBOARD_LOGGING == 1 and not cross_valid:
                tovis = self.metric_summarizer.fetch_scalers(use="visual")
                self.metric_summarizer.visualize_scalers(tovis, self.step)
                del tovis

 
            tot_time = timer.toc()
            if niter % self.print_inteval == 0:
                todisp = self.metric_summarizer.fetch_scalers(use="display")
                todispmsg = self.metric_summarizer.display_msg(todisp)
                del todisp
                msg = ("\nEpoch {} | Step {} | Iter {}:\n").format(self.epoch, self.step, niter)
                msg += todispmsg
                logging.info("Progress:\n" + msg.strip())

            if utils.TENSORBOARD_LOGGING == 1 and not cross_valid and self.step % 1000 == 0:
                self.visualize_figure()

        self.metric_summarizer.reset_metrics()
        torch.cuda.empty_cache()
        time.sleep(2)
        return (tot_loss/tot_token).item()

# ... (lines 288-580 omitted)
