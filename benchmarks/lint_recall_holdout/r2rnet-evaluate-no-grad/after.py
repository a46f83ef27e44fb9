# Source: https://github.com/JianghaiSCU/R2RNet/blob/069f79e1c8a592bce76105a99bd53548c7a21fa0/model.py
# Adapted excerpt, after the fix https://github.com/JianghaiSCU/R2RNet/commit/069f79e1c8a592bce76105a99bd53548c7a21fa0
# (trimmed to the code the fix touches; omitted lines are marked).
import os
import time
import random

from PIL import Image
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.autograd import Variable
import numpy as np
from pytorch_msssim import ssim
# ... (lines 13-651 omitted)
class R2RNet(nn.Module):
    def __init__(self):
        super(R2RNet, self).__init__()

        self.DecomNet = DecomNet()
        self.DenoiseNet = DenoiseNet()
        self.RelightNet = RelightNet()
        self.vgg = load_vgg16("./model")

    def forward(self, input_low, input_high):


        input_low = Variable(torch.FloatTensor(torch.from_numpy(input_low))).cuda()
        input_high = Variable(torch.FloatTensor(torch.from_numpy(input_high))).cuda()
        # Forward DecomNet
        R_low, I_low = self.DecomNet(input_low)
        R_high, I_high = self.DecomNet(input_high)
        # Forward DenoiseNet
        denoise_R = self.DenoiseNet(I_low, R_low)
        # Forward RelightNet
        I_delta = self.RelightNet(I_low, denoise_R)

        # Other variables
        I_low_3 = torch.cat((I_low, I_low, I_low), dim=1)
        I_high_3 = torch.cat((I_high, I_high, I_high), dim=1)
        I_delta_3 = torch.cat((I_delta, I_delta, I_delta), dim=1)

        # DecomNet_loss
        self.vgg_loss = compute_vgg_loss(R_low * I_low_3,  input_low).cuda() + compute_vgg_loss(R_high * I_high_3, input_high).cuda()
        self.recon_loss_low = F.l1_loss(R_low * I_low_3, input_low).cuda()
        self.recon_loss_high = F.l1_loss(R_high * I_high_3, input_high).cuda()
        self.recon_loss_mutal_low = F.l1_loss(R_high * I_low_3, input_low).cuda()
        self.recon_loss_mutal_high = F.l1_loss(R_low * I_high_3, input_high).cuda()

        self.loss_Decom = self.recon_loss_low + \
                          self.recon_loss_high + \
                          0.1 * self.recon_loss_mutal_low + \
                          0.1 * self.recon_loss_mutal_high + \
                          self.vgg_loss
        # DenoiseNet_loss
        self.denoise_loss = F.l1_loss(denoise_R, R_high).cuda()
        self.denoise_vgg = compute_vgg_loss(denoise_R, R_high).cuda()
        self.denoise_SSIM = 1 - ssim(denoise_R, R_high, win_size=3).cuda()
        self.loss_Denoise = self.denoise_loss + \
                            self.denoise_SSIM + self.denoise_vgg

        # RelightNet_loss
        self.SSIM_loss = 1 - ssim(denoise_R * I_delta_3, input_high, win_size=3).cuda()
        self.Relight_loss = F.l1_loss(denoise_R * I_delta_3, input_high).cuda()
        self.Relight_vgg = compute_vgg_loss(denoise_R * I_delta_3, input_high).cuda()

        self.loss_Relight = self.Relight_loss + \
                            self.SSIM_loss + self.Relight_vgg

        self.output_R_low = R_low.detach().cpu()
        self.output_I_low = I_low_3.detach().cpu()
        self.output_I_delta = I_delta_3.detach().cpu()
        self.output_R_denoise = denoise_R.detach().cpu()
        self.output_S = denoise_R.detach().cpu() * I_delta_3.detach().cpu()

    ...  # (lines 712-733 omitted)
    def evaluate(self, epoch_num, eval_low_data_names, vis_dir, train_phase):
        print("Evaluating for phase %s / epoch %d..." % (train_phase, epoch_num))
        with torch.no_grad():# Otherwise the intermediate gradient would take up huge amount of CUDA memory
            for idx in range(len(eval_low_data_names)):
                eval_low_img = Image.open(eval_low_data_names[idx])
                eval_low_img = np.array(eval_low_img, dtype="float32")/255.0
                eval_low_img = np.transpose(eval_low_img, (2, 0, 1))
                input_low_eval = np.expand_dims(eval_low_img, axis=0)

                if train_phase == "Decom":
                    self.forward(input_low_eval, input_low_eval)
                    result_1 = self.output_R_low
                    result_2 = self.output_I_low
                    input = np.squeeze(input_low_eval)
                    result_1 = np.squeeze(result_1)
                    result_2 = np.squeeze(result_2)
                    cat_image = np.concatenate([input, result_1, result_2], axis=2)
                if train_phase == 'Denoise':
                    self.forward(input_low_eval, input_low_eval)
                    result_1 = self.output_R_denoise
                    input = np.squeeze(input_low_eval)
                    result_1 = np.squeeze(result_1)
                    cat_image = np.concatenate([input, result_1], axis=2)
                if train_phase == "Relight":
                    self.forward(input_low_eval, input_low_eval)
                    result_1 = self.output_R_denoise
                    result_2 = self.output_I_low
                    result_3 = self.output_I_delta
                    result_4 = self.output_S
                    input = np.squeeze(input_low_eval)
                    result_1 = np.squeeze(result_1)
                    result_2 = np.squeeze(result_2)
                    result_3 = np.squeeze(result_3)
                    result_4 = np.squeeze(result_4)
                    cat_image = np.concatenate([input, result_1, result_2, result_3, result_4], axis=2)

                cat_image = np.transpose(cat_image, (1, 2, 0))
                # print(cat_image.shape)
                im = Image.fromarray(np.clip(cat_image * 255.0, 0, 255.0).astype('uint8'))
                filepath = os.path.join(vis_dir, 'eval_%s_%d_%d.png' %
                           (train_phase, idx + 1, epoch_num))
                im.save(filepath[:-4] + '.jpg')


    ...  # (lines 778-999 omitted)
