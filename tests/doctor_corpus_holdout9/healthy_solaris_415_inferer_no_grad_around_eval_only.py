# Source: https://github.com/CosmiQ/solaris/pull/415
#   code: Inferer.__init__ and Inferer.__call__ of solaris/nets/infer.py before the pull request:
#   `with torch.no_grad():` wraps only `self.model.eval()`, so each image's tiles go through the
#   model with autograd on (the pull request's point); the predictions leave through
#   `subarr_preds.cpu().data.numpy()`
# Adapted: get_model replaced by a small fully convolutional segmentation network;
#   InferenceTiler and stitch_images by minimal stand-ins (non-overlapping 64x64 tiles of a
#   random 3x256x256 image per path; average stitching); skimage.io.imsave by numpy.save into a
#   temporary directory; the config is a dict with the used keys; 12 images; the Keras branch
#   and additional inputs dropped; cpu, seeded.
import os
import tempfile

import numpy as np
import torch
import torch.nn as nn


def get_model(model_name, framework, model_path, categorical, num_classes, pretrained=True,
              custom_model_dict=None):
    return nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(32, num_classes, 1), nn.Sigmoid())


def process_aug_dict(d):
    return d


class InferenceTiler:
    def __init__(self, framework, width, height, x_step=None, y_step=None, augmentations=None):
        self.width, self.height = width, height
        self.x_step, self.y_step = x_step or width, y_step or height

    def __call__(self, im_path):
        rng = np.random.default_rng(abs(hash(im_path)) % 2 ** 32)
        im = rng.random((3, 256, 256), dtype=np.float32)
        tiles, idx_refs = [], []
        for y in range(0, 256 - self.height + 1, self.y_step):
            for x in range(0, 256 - self.width + 1, self.x_step):
                tiles.append(im[:, y:y + self.height, x:x + self.width])
                idx_refs.append((y, x))
        return np.stack(tiles), idx_refs, (256, 256)


def stitch_images(im_arr, idx_refs, out_width, out_height, method='average'):
    out = np.zeros((im_arr.shape[1], out_height, out_width), dtype=np.float32)
    count = np.zeros((1, out_height, out_width), dtype=np.float32)
    h, w = im_arr.shape[2:]
    for tile, (y, x) in zip(im_arr, idx_refs):
        out[:, y:y + h, x:x + w] += tile
        count[:, y:y + h, x:x + w] += 1
    return out / np.maximum(count, 1)


class Inferer(object):
    """Object for training `solaris` models using PyTorch or Keras."""

    def __init__(self, config, custom_model_dict=None):
        self.config = config
        self.batch_size = self.config['batch_size']
        self.framework = self.config['nn_framework']
        self.model_name = self.config['model_name']
        self.categorical = self.config['data_specs']['is_categorical']
        self.num_classes = self.config['data_specs']['num_classes']
        self.model_path = self.config.get('model_path', None)
        self.model = get_model(self.model_name, self.framework,
                               self.model_path, self.categorical,
                               self.num_classes, pretrained=True,
                               custom_model_dict=custom_model_dict)
        self.window_step_x = self.config['inference'].get('window_step_size_x', None)
        self.window_step_y = self.config['inference'].get('window_step_size_y', None)
        if self.window_step_x is None:
            self.window_step_x = self.config['data_specs']['width']
        if self.window_step_y is None:
            self.window_step_y = self.config['data_specs']['height']
        self.stitching_method = self.config['inference'].get('stitching_method', 'average')
        self.output_dir = self.config['inference']['output_dir']
        if not os.path.isdir(self.output_dir):
            os.makedirs(self.output_dir)

    def __call__(self, infer_df):
        inf_tiler = InferenceTiler(
            self.framework,
            width=self.config['data_specs']['width'],
            height=self.config['data_specs']['height'],
            x_step=self.window_step_x,
            y_step=self.window_step_y,
            augmentations=process_aug_dict(self.config['inference_augmentation'])
        )
        for idx, im_path in enumerate(infer_df['image']):
            inf_input, idx_refs, (src_im_height, src_im_width) = inf_tiler(im_path)

            if self.framework in ['torch', 'pytorch']:
                with torch.no_grad():
                    self.model.eval()
                if torch.cuda.is_available():
                    device = torch.device('cuda')
                    self.model = self.model.cuda()
                else:
                    device = torch.device('cpu')
                inf_input = torch.from_numpy(inf_input).float().to(device)

                subarr_preds = self.model(inf_input)
                subarr_preds = subarr_preds.cpu().data.numpy()
            stitched_result = stitch_images(subarr_preds,
                                            idx_refs=idx_refs,
                                            out_width=src_im_width,
                                            out_height=src_im_height,
                                            method=self.stitching_method)
            np.save(os.path.join(self.output_dir, os.path.split(im_path)[1]), stitched_result)


torch.manual_seed(0)
with tempfile.TemporaryDirectory() as output_dir:
    config = {'batch_size': 16, 'nn_framework': 'torch', 'model_name': 'xdxd_spacenet4',
              'model_path': None, 'train': False,
              'data_specs': {'is_categorical': False, 'num_classes': 1, 'width': 64, 'height': 64},
              'inference': {'output_dir': output_dir, 'stitching_method': 'average'},
              'inference_augmentation': {}}
    infer_df = {'image': ['tile_{:03d}.tif'.format(i) for i in range(12)]}
    inferer = Inferer(config)
    inferer(infer_df)
    print(sorted(os.listdir(output_dir))[:3], len(os.listdir(output_dir)))
