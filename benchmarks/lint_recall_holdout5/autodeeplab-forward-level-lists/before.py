# Source: https://github.com/MenghaoGuo/AutoDeeplab/blob/14a19c1e2263280ffce7e371fc470dd59f059bf0/auto_deeplab.py
# Adapted excerpt, before the fix https://github.com/MenghaoGuo/AutoDeeplab/commit/816dd26edc142a928cb204a2274c7db174210678
# (trimmed to the code the fix touches; omitted lines are marked).
import torch
import torch.nn as nn
import numpy as np
import model_search
from genotypes import PRIMITIVES
from genotypes import Genotype
import torch.nn.functional as F
from operations import *

class AutoDeeplab (nn.Module) :
    def __init__(self, num_classes, num_layers, criterion, num_channel = 20, multiplier = 5, step = 5, cell=model_search.Cell):
        super(AutoDeeplab, self).__init__()
        self.level_2 = []
        self.level_4 = []
        self.level_8 = []
        self.level_16 = []
        self.level_32 = []
        self.cells = nn.ModuleList()
        self._num_layers = num_layers
        self._num_classes = num_classes
        self._step = step
        self._multiplier = multiplier
    ...  # (lines 23-162 omitted)
    def forward (self, x) :
        # self._init_level_arr (x)
        temp = self.stem0 (x)
        self.level_2.append (self.stem1 (temp))
        self.level_4.append (self.stem2 (self.level_2[-1]))
        weight_cells = F.softmax(self.alphas_cell, dim=-1)
        weight_network = F.softmax (self.alphas_network, dim = -1)
        count = 0
        weight_network = F.softmax (self.alphas_network, dim = -1)
        weight_cells = F.softmax(self.alphas_cell, dim=-1)
        for layer in range (self._num_layers) :

            if layer == 0 :
                level4_new = self.cells[count] (None, self.level_4[-1], weight_cells)
                count += 1
                level8_new = self.cells[count] (None, self.level_4[-1], weight_cells)
                count += 1
                self.level_4.append (level4_new * self.alphas_network[layer][0][0])
                self.level_8.append (level8_new * self.alphas_network[layer][0][1])
                # print ((self.level_4[-2]).size (),  (self.level_4[-1]).size())
            elif layer == 1 :
                level4_new_1 = self.cells[count] (self.level_4[-2], self.level_4[-1], weight_cells)
                count += 1
                level4_new_2 = self.cells[count] (self.level_4[-2], self.level_8[-1], weight_cells)
                count += 1
                level4_new = self.alphas_network[layer][0][0] * level4_new_1 + self.alphas_network[layer][0][1] * level4_new_2

                level8_new_1 = self.cells[count] (None, self.level_4[-1], weight_cells)
                count += 1
                level8_new_2 = self.cells[count] (None, self.level_8[-1], weight_cells)
                count += 1
                level8_new = self.alphas_network[layer][1][0] * level8_new_1 + self.alphas_network[layer][1][1] * level8_new_2

                level16_new = self.cells[count] (None, self.level_8[-1], weight_cells)
                level16_new = level16_new * self.alphas_network[layer][1][2]
                count += 1


                ...  # (lines 201-299 omitted)
                count += 1
                level32_new = self.alphas_network[layer][3][0] * level32_new_1 + self.alphas_network[layer][3][1] * level32_new_2

                self.level_4.append (level4_new)
                self.level_8.append (level8_new)
                self.level_16.append (level16_new)
                self.level_32.append (level32_new)
        # print (self.level_4[-1].size(),self.level_8[-1].size(),self.level_16[-1].size(),self.level_32[-1].size())
        # concate_feature_map = torch.cat ([self.level_4[-1], self.level_8[-1],self.level_16[-1], self.level_32[-1]], 1)
        aspp_result_4 = self.aspp_4 (self.level_4[-1])

        aspp_result_8 = self.aspp_8 (self.level_8[-1])
        aspp_result_16 = self.aspp_16 (self.level_16[-1])
        aspp_result_32 = self.aspp_32 (self.level_32[-1])
        upsample = nn.Upsample(size=x.size()[2:], mode='bilinear', align_corners=True)
        aspp_result_4 = upsample (aspp_result_4)
        aspp_result_8 = upsample (aspp_result_8)
        aspp_result_16 = upsample (aspp_result_16)
        aspp_result_32 = upsample (aspp_result_32)
        concate_feature_map = torch.cat ([aspp_result_4, aspp_result_8, aspp_result_16, aspp_result_32], 1)
        out = self.final_conv (concate_feature_map)
        return out

# ... (lines 323-581 omitted)
