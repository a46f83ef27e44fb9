# Source: https://github.com/xuebinqin/U-2-Net/issues/243
# Adapted: u2net_test.py as of the issue (commit f2b8e4a): main()'s inference loop, normPRED
#   and save_output kept; U2NET (173.6 MB) -> a small encoder-decoder with the same seven
#   sigmoid side outputs d1..d7, no weights loaded; the test images and SalObjDataset ->
#   40 random 3x160x160 images in a DataLoader with batch size 1 (num_workers 0);
#   save_output keeps its conversion to numpy and stops there (PIL and skimage, which read
#   the original image and write the PNG, are not installed); cpu, seeded.
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)


class U2NET(nn.Module):
    def __init__(self, in_ch=3, out_ch=1):
        super(U2NET, self).__init__()
        self.enc = nn.ModuleList([nn.Conv2d(in_ch if i == 0 else 16, 16, 3, padding=1) for i in range(6)])
        self.side = nn.ModuleList([nn.Conv2d(16, out_ch, 3, padding=1) for _ in range(6)])
        self.outconv = nn.Conv2d(6 * out_ch, out_ch, 1)

    def forward(self, x):
        size = x.shape[2:]
        sides = []
        h = x
        for i, (enc, side) in enumerate(zip(self.enc, self.side)):
            h = F.relu(enc(h))
            sides.append(F.interpolate(side(h), size=size, mode='bilinear'))
            if i < 5:
                h = F.max_pool2d(h, 2, ceil_mode=True)
        d0 = self.outconv(torch.cat(sides, 1))
        return tuple(torch.sigmoid(d) for d in [d0] + sides)


class SalObjDataset(Dataset):
    def __init__(self, img_name_list):
        self.image_name_list = img_name_list

    def __len__(self):
        return len(self.image_name_list)

    def __getitem__(self, idx):
        return {'imidx': idx, 'image': torch.rand(3, 160, 160)}


# normalize the predicted SOD probability map
def normPRED(d):
    ma = torch.max(d)
    mi = torch.min(d)

    dn = (d-mi)/(ma-mi)

    return dn

def save_output(image_name,pred,d_dir):

    predict = pred
    predict = predict.squeeze()
    predict_np = predict.cpu().data.numpy()

    pb_np = (predict_np*255).astype(np.uint8)
    return pb_np

def main():

    # --------- 1. get image path and name ---------
    model_name='u2net'#u2netp

    prediction_dir = os.path.join('test_data', model_name + '_results' + os.sep)
    img_name_list = ['test_data/test_images/%04d.jpg' % i for i in range(40)]

    # --------- 2. dataloader ---------
    test_salobj_dataset = SalObjDataset(img_name_list = img_name_list)
    test_salobj_dataloader = DataLoader(test_salobj_dataset,
                                        batch_size=1,
                                        shuffle=False,
                                        num_workers=0)

    # --------- 3. model define ---------
    net = U2NET(3,1)
    net.eval()

    # --------- 4. inference for each image ---------
    for i_test, data_test in enumerate(test_salobj_dataloader):

        print("inferencing:",img_name_list[i_test].split(os.sep)[-1])

        inputs_test = data_test['image']
        inputs_test = inputs_test.type(torch.FloatTensor)

        inputs_test = Variable(inputs_test)

        d1,d2,d3,d4,d5,d6,d7= net(inputs_test)

        # normalization
        pred = d1[:,0,:,:]
        pred = normPRED(pred)

        save_output(img_name_list[i_test],pred,prediction_dir)

        del d1,d2,d3,d4,d5,d6,d7

if __name__ == "__main__":
    main()
