# Source: https://github.com/zhanhz/PC-NBV_pytorch/issues/3
#   code: Manager.py, models/pc_nbv.py (AutoEncoder) and utils.py (resample_pcd) at commit
#   8d93b65
# Adapted: Manager.py's next-best-view loop kept (no torch.no_grad(), as in the issue), with
#   open3d's point-cloud reading -> random partial scans of 200 points per view, the viewspace
#   and start-view files -> 33 random views and random start views, the checkpoint loading and
#   np.savetxt of the selected views dropped, 12 models of 10 scans; AutoEncoder kept with the
#   same encoder/decoder structure and call (points, view_state) -> (feature, view scores) but
#   with a 2-layer point MLP instead of Feature_Extraction/SelfAttention and 256 instead of 1024
#   channels; resample_pcd kept; np.int -> int (removed from numpy); cpu, seeded.
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

DEVICE = torch.device('cpu')


def resample_pcd(pcd, n):
    """Drop or duplicate points so that pcd has exactly n points"""
    idx = np.random.permutation(pcd.shape[0])
    if idx.shape[0] < n:
        idx = np.concatenate([idx, np.random.randint(pcd.shape[0], size=n-pcd.shape[0])])
    return pcd[idx[:n]]


class Encoder(nn.Module):
    def __init__(self, in_channel=161):
        super(Encoder, self).__init__()
        self.feature_extraction = nn.Sequential(nn.Conv1d(3, 64, 1), nn.ReLU(), nn.Conv1d(64, 64, 1))
        self.bn1 = nn.BatchNorm1d(64)
        self.conv1 = nn.Conv1d(in_channel, 256, 1)
        self.conv2 = nn.Conv1d(256, 256, 1)
        self.bn3 = nn.BatchNorm1d(256)
        self.bn4 = nn.BatchNorm1d(256)

    def forward(self, inputs, view_state):
        n = inputs.size()[2]

        x = self.feature_extraction(inputs)         #(B, 64, N)
        x = self.bn1(x)

        g = torch.max(x, dim=2, keepdim=True)[0]    #(B, 64, 1)
        g = g.repeat(1, 1, n)                       #(B, 64, N)

        vi = view_state.unsqueeze(2).repeat(1, 1, n)
        x = torch.cat([x, g, vi], dim = 1)          #(B, 161, N)   161 = 64 + 64 + 33

        x = F.relu(self.bn3(self.conv1(x)))         #(B, 256, N)
        x = self.bn4(self.conv2(x))                 #(B, 256, N)

        v = torch.max(x, dim = -1)[0]               #(B, 256)

        return v


class Decoder(nn.Module):
    def __init__(self, views=33):
        super(Decoder, self).__init__()
        self.views = views

        self.linear1 = nn.Linear(256, 256)
        self.linear2 = nn.Linear(256, 128)
        self.linear4 = nn.Linear(128, self.views)

        self.bn1 = nn.BatchNorm1d(256)
        self.bn2 = nn.BatchNorm1d(128)

    def forward(self, x):
        x = F.relu(self.bn1(self.linear1(x)))       #(B, 256)
        x = F.relu(self.bn2(self.linear2(x)))       #(B, 128)

        v = self.linear4(x)                         #(B, 33)

        return v


class AutoEncoder(nn.Module):
    def __init__(self, views=33):
        super(AutoEncoder, self).__init__()

        self.encoder = Encoder()
        self.decoder = Decoder(views)

    def forward(self, x, viewstate):
        x = self.encoder(x, viewstate)
        v = self.decoder(x)
        return x, v


np.random.seed(0)
torch.manual_seed(0)
ex_num = 1
scan_num = 10

viewspace = np.random.rand(33, 3)
model_list = ['model%02d' % k for k in range(12)]

network = AutoEncoder()
network.to(DEVICE)
network.eval()

time_count_num = 0
time_all = 0

for ex_i in range(ex_num):

    start_view = np.random.randint(0, 33, len(model_list))

    for i in range(len(model_list)):

        start_time = time.time()
        model_id = model_list[i]
        cur_view = int(start_view[i])
        view_state = np.zeros(viewspace.shape[0], dtype=int)

        scan_pc = np.zeros((1, 3))
        scan_view_list = np.zeros(scan_num)

        for scan_id in range(scan_num):
            time_count_num += 1
            view_state[cur_view] = 1
            scan_view_list[scan_id] = cur_view

            partial = np.random.rand(200, 3) + viewspace[cur_view]

            scan_pc = np.append(scan_pc, partial, axis=0)
            partial = resample_pcd(scan_pc, 1024)

            partial_tensor = torch.tensor(partial[np.newaxis, ...].astype(np.float32)).permute(0, 2, 1).to(DEVICE)
            view_state_tensor = torch.tensor(view_state.astype(np.float32))[np.newaxis, ...].to(DEVICE)


            _, eval_value = network(partial_tensor, view_state_tensor)
            eval_value = eval_value[0].cpu().detach().numpy()

            new_view = np.argmax(eval_value, axis = 0)

            cur_view = new_view

        end_time = time.time()
        print("model:" + model_id + " spend time:" + str(end_time - start_time))
        time_all += end_time - start_time

print("ave time per scan:" + str(time_all / time_count_num))
