# Source: https://github.com/ltgoslo/norbench/blob/ef17b6b1989a0d3582f43813522840f28976a94c/evaluation_scripts/sa_classification.py
# Adapted excerpt, before the fix https://github.com/ltgoslo/norbench/commit/1c1fc992badb9f2122c70fa4d81e1fff800fe025
# (trimmed to the code the fix touches; omitted lines are marked).
#! /bin/env python3
# coding: utf-8

import pandas as pd
import torch
from torch.utils import data
from torch.optim import AdamW
from transformers import AutoModelForSequenceClassification, AutoTokenizer
import argparse
import logging
import tqdm
from sklearn import metrics
import os
import random
import numpy as np
import sys


def multi_acc(y_pred, y_test):
    batch_predictions = torch.log_softmax(y_pred, dim=1).argmax(dim=1)
    correctness = batch_predictions == y_test
    acc = torch.sum(correctness).item() / y_test.size(0)
    return acc, batch_predictions.tolist()

# ... (lines 25-56 omitted)
if __name__ == "__main__":
    ...  # (lines 58-139 omitted)

    num_classes = train_data["sentiment"].nunique()
    logger.info(f"We have {num_classes} classes")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    tokenizer = AutoTokenizer.from_pretrained(modelname, use_fast=False)

    if args.custom:
        logger.info('You are using a custom wrapper, NOT a HuggingFace model.')
        sys.path.append(modelname)
        from modeling_norbert import NorbertForSequenceClassification
        model = NorbertForSequenceClassification.from_pretrained(
            modelname, num_labels=num_classes).to(device)
    else:
        model = AutoModelForSequenceClassification.from_pretrained(
            modelname, num_labels=num_classes
        ).to(device)

    if args.freeze:
        logger.info("Freezing the model, training only the classifier on top")
        for param in model.base_model.parameters():
            param.requires_grad = False

    model.train()

    optimizer = AdamW(model.parameters(), lr=1e-5)

    train_texts = train_data.review.to_list()
    text_labels = train_data.sentiment.to_list()

    dev_texts = dev_data.review.to_list()
    dev_labels = dev_data.sentiment.to_list()

    test_texts = test_data.review.to_list()
    test_labels = test_data.sentiment.to_list()

    logger.info(f"Tokenizing with max length {args.maxl}...")

    train_labels_tensor, train_encoding = encoder(
        text_labels, train_texts, tokenizer, device
    )
    test_labels_tensor, test_encoding = encoder(
        test_labels, test_texts, tokenizer, device
    )
    dev_labels_tensor, dev_encoding = encoder(dev_labels, dev_texts, tokenizer, device)

    input_ids = train_encoding["input_ids"]
    attention_mask = train_encoding["attention_mask"]
    dev_input_ids = dev_encoding["input_ids"]
    dev_attention_mask = dev_encoding["attention_mask"]
    test_input_ids = test_encoding["input_ids"]
    test_attention_mask = test_encoding["attention_mask"]
    logger.info("Tokenizing finished.")

    train_dataset = data.TensorDataset(input_ids, attention_mask, train_labels_tensor)
    train_iter = data.DataLoader(train_dataset, batch_size=args.bsize, shuffle=True)

    dev_dataset = data.TensorDataset(
        dev_input_ids, dev_attention_mask, dev_labels_tensor
    )
    dev_iter = data.DataLoader(dev_dataset, batch_size=args.bsize, shuffle=False)

    test_dataset = data.TensorDataset(
        test_input_ids, test_attention_mask, test_labels_tensor
    )
    test_iter = data.DataLoader(test_dataset, batch_size=args.bsize, shuffle=False)

    logger.info(f"Training with batch size {args.bsize} for {args.epochs} epochs...")

    fscores = []
    for epoch in range(args.epochs):
        losses = 0
        total_train_acc = 0
        all_predictions = []
        for text, mask, label in tqdm.tqdm(train_iter):
            optimizer.zero_grad()
            outputs = model(text, attention_mask=mask, labels=label)
            loss = outputs.loss
            losses += loss.item()
            predictions = outputs.logits
            accuracy, predicted_labels = multi_acc(predictions, label)
            all_predictions += predicted_labels
            total_train_acc += accuracy
            loss.backward()
            optimizer.step()
        train_acc = total_train_acc / len(train_iter)
        train_loss = losses / len(train_iter)

        # Testing on the dev set:
        model.eval()
        dev_predictions = []
        dev_labels = []
        for text, mask, label in tqdm.tqdm(dev_iter):
            outputs = model(text, attention_mask=mask)
            predictions = outputs.logits
            accuracy, predicted_labels = multi_acc(predictions, label)
            dev_predictions += predicted_labels
            dev_labels += label.tolist()
        precision, recall, fscore, support = metrics.precision_recall_fscore_support(
            [mapping[el] for el in dev_labels],
            [mapping[el] for el in dev_predictions],
            average="macro",
            zero_division=0,
        )
        logger.info(
            f"Epoch: {epoch}, Train loss: {train_loss:.4f}, Train accuracy: {train_acc:.4f}, "
            f"Dev F1: {fscore:.4f}"
        )
        fscores.append(fscore)
        if len(fscores) > 2:
            if fscores[-1] <= fscores[-2]:
                logger.info("Early stopping!")
                break
        model.train()

    # Final testing on the test set
    scores = [fscores[-1]]
    model.eval()

    logger.info(f"Testing on the test set with batch size {args.bsize}...")

    test_predictions = []
    test_labels = []
    for text, mask, label in tqdm.tqdm(test_iter):
        outputs = model(text, attention_mask=mask)
        predictions = outputs.logits
        accuracy, predicted_labels = multi_acc(predictions, label)
        test_predictions += predicted_labels
        test_labels += label.tolist()

    mapped_labels = [mapping[el] for el in test_labels]
    mapped_predictions = [mapping[el] for el in test_predictions]
    precision, recall, fscore, support = metrics.precision_recall_fscore_support(
        mapped_labels, mapped_predictions, average="macro", zero_division=0
    )
    scores.append(fscore)
    logger.info(
        metrics.classification_report(
            mapped_labels, mapped_predictions, zero_division=0
        )
    )

    with open("scores/" + current_name + ".tsv", "a") as f:
        f.write(f"{args.seed}\t{scores[0]}\t{scores[1]}\n")
