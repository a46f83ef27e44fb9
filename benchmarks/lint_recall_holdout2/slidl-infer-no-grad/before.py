# Source: https://github.com/markowetzlab/slidl/blob/2516df7adfb4f363c9d6ad6f31120a1c66ae02e5/slidl/slide.py
# Adapted excerpt, before the fix https://github.com/markowetzlab/slidl/commit/bff889278d8055c1492ad55c8dd938c821c9b376
# (trimmed to the code the fix touches; omitted lines are marked).
# This is the experimental version of slide with annotation and tile extraction
# capabilities

import torch
from torchvision import transforms
import numpy as np
import pyvips as pv
import pandas as pd
from PIL import Image, ImageDraw
from joblib import Parallel, delayed
from sklearn.metrics import accuracy_score, balanced_accuracy_score, f1_score, precision_score, recall_score
from skimage.transform import downscale_local_mean
from skimage.filters import threshold_triangle, threshold_otsu
from skimage.morphology import binary_dilation, remove_small_objects
from scipy.ndimage.morphology import binary_fill_holes
import scipy.sparse as sps
from skimage.color import rgb2gray, rgb2lab
from skimage.transform import resize
import matplotlib.pyplot as plt
import matplotlib as mpl
from pathlib import Path
from slidl.processor import Processor
from slidl.models.tissuedetector import tissueDetector
from slidl.utils.torch.WholeSlideImageDataset import WholeSlideImageDataset
from slidl.utils.torch.dice_loss import dice_coeff
import xml.etree.ElementTree as ET
from shapely import geometry
from shapely.ops import unary_union
from tqdm import tqdm
import random
import json
import os
import sys
import pickle
pv.cache_set_max(0)



def unwrap_self(arg, **kwarg):
    return Slide.square_int(*arg, **kwarg)

class Slide:
    ...  # (lines 43-1773 omitted)
    def inferClassifier(self, trainedModel, classNames, dataTransforms=None, batchSize=30, numWorkers=16, foregroundLevelThreshold=False, tissueLevelThreshold=False, overwriteExistingClassifications=False, silent=False):
        ...  # (lines 1775-1788 omitted)

        if not self.hasTileDictionary():
            raise PermissionError(
                'setTileProperties must be called before inferring a classifier')
        if tissueLevelThreshold:
            if not self.hasTissueDetection():
                raise PermissionError('Deep tissue detection must be performed with detectTissue() before tissueLevelThreshold can be defined')
        if foregroundLevelThreshold:
            if 'foregroundLevel' not in self.tileDictionary[list(self.tileDictionary.keys())[0]]:
                raise PermissionError('Foreground detection must be performed with detectForeground() before tissueLevelThreshold can be defined')
        if type(classNames) != list:
            raise ValueError('classes must be a list if defined')

        if torch.cuda.is_available():
            print("Inferring model on GPU")
        else:
            print("Inferring model on CPU")

        device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
        trainedModel.to(device)
        trainedModel.eval()

        pathSlideDataset = WholeSlideImageDataset(self, tissueLevelThreshold=tissueLevelThreshold,
            foregroundLevelThreshold=foregroundLevelThreshold, transform=dataTransforms)

        if 'classifierInferencePrediction' in self.tileDictionary[pathSlideDataset.suitableTileAddresses[0]]:
            if not overwriteExistingClassifications:
                raise PermissionError('Classification predictions are already present in the tile dictionary. Set overwriteExistingClassifications to True to overwrite them.')

        pathSlideDataloader = torch.utils.data.DataLoader(pathSlideDataset, batch_size=batchSize, shuffle=False, num_workers=numWorkers)
        classifierPredictionTileAddresses = []
        for inputs in tqdm(pathSlideDataloader, disable=silent):
            inputTile = inputs['image'].to(device)
            output = trainedModel(inputTile)
            output = output.to(device)

            batch_prediction = torch.nn.functional.softmax(
                output, dim=1).cpu().data.numpy()

            for index in range(len(inputTile)):
                tileAddress = (inputs['tileAddress'][0][index].item(),
                               inputs['tileAddress'][1][index].item())
                preds = batch_prediction[index, ...].tolist()
                if len(preds) != len(classNames):
                    raise ValueError('Model has '+str(len(preds))+' classes but only '+str(len(classNames))+' class names were provided in the classes argument')
                prediction = {}
                for i, pred in enumerate(preds):
                    prediction[classNames[i]] = pred
                self.appendTag(tileAddress, 'classifierInferencePrediction', prediction)
                classifierPredictionTileAddresses.append(tileAddress)
        if len(classifierPredictionTileAddresses) > 0:
            self.classifierPredictionTileAddresses = classifierPredictionTileAddresses
        else:
            raise Warning('No suitable tiles found at current tissueLevelThreshold and foregroundLevelThreshold')

    def inferSegmenter(self, trainedModel, classNames, dataTransforms=None, dtype='int', batchSize=1, numWorkers=16, foregroundLevelThreshold=False, tissueLevelThreshold=False, overwriteExistingSegmentations=False, silent=False):
        ...  # (lines 1845-1861 omitted)

        if not self.hasTileDictionary():
            raise PermissionError(
                'setTileProperties must be called before inferring a classifier')
        if tissueLevelThreshold:
            if not self.hasTissueDetection():
                raise PermissionError('Deep tissue detection must be performed with detectTissue() before tissueLevelThreshold can be defined')
        if foregroundLevelThreshold:
            if 'foregroundLevel' not in self.tileDictionary[list(self.tileDictionary.keys())[0]]:
                raise PermissionError('Foreground detection must be performed with detectForeground() before tissueLevelThreshold can be defined')
        if type(classNames) != list:
            raise ValueError('classes must be a list if defined')

        if torch.cuda.is_available():
            print("Inferring model on GPU")
        else:
            print("Inferring model on CPU")

        device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
        trainedModel.to(device)
        trainedModel.eval()

        if trainedModel.n_classes != len(classNames):
            raise ValueError('Model has '+str(trainedModel.n_classes)+' classes but only '+str(len(classNames))+' class names were provided in the classes argument')

        pathSlideDataset = WholeSlideImageDataset(self, tissueLevelThreshold=tissueLevelThreshold,
            foregroundLevelThreshold=foregroundLevelThreshold, transform=dataTransforms, segmenting=True)

        if 'segmenterInferencePrediction' in self.tileDictionary[pathSlideDataset.suitableTileAddresses[0]]:
            if not overwriteExistingSegmentations:
                raise PermissionError('Segmentation predictions are already present in the tile dictionary. Set overwriteExistingSegmentations to True to overwrite them.')

        pathSlideDataloader = torch.utils.data.DataLoader(pathSlideDataset, batch_size=batchSize, shuffle=False, num_workers=numWorkers)
        segmenterPredictionTileAddresses = []
        counter = 0
        for inputs in tqdm(pathSlideDataloader, disable=silent):
            inputTile = inputs['image'].to(device)

            # input into net
            output = trainedModel(inputTile)
            output = output.to(device)

            if trainedModel.n_classes > 1:
                batch_probs = F.softmax(output, dim=1)
            else:
                batch_probs = torch.sigmoid(output)

            for index in range(len(inputTile)):
                tileAddress = (inputs['tileAddress'][0][index].item(),
                               inputs['tileAddress'][1][index].item())

                tile_probs = batch_probs[index, ...]

                tile_probs = tile_probs.squeeze(0)

                tf = transforms.Compose([
                    transforms.ToPILImage(),
                    transforms.Resize(pathSlideDataset.tileSize),
                    transforms.ToTensor() # converts from HWC to CWH and divides by 255
                ])

                tile_probs = tf(tile_probs.cpu())
                full_mask = tile_probs.squeeze().cpu().numpy()

                ...  # (lines 1926-1949 omitted)

                self.appendTag(tileAddress, 'segmenterInferencePrediction', segmentation_masks)
                segmenterPredictionTileAddresses.append(tileAddress)

        if len(segmenterPredictionTileAddresses) > 0:
            self.segmenterPredictionTileAddresses = segmenterPredictionTileAddresses
        else:
            raise Warning('No suitable tiles found at current tissueLevelThreshold and foregroundLevelThreshold')

# ... (lines 1959-2461 omitted)
