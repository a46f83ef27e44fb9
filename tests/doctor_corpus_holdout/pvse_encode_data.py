# Source: https://github.com/yalesong/pvse/issues/30
#   code: eval.py (encode_data, i2t, t2i, evalrank) at commit 709284a
# Adapted: the PVSE model (ResNet image encoder, GloVe/GRU text encoder), the vocabulary
#   pickle, the checkpoint and get_test_loader replaced by a small image/text embedding model
#   with random weights and 240 random (feature, caption) pairs in batches of 16; args from a
#   Namespace (f30k, eval_on_gpu=True, no MIL); .cuda() -> cpu; the MSCOCO 5-fold branch and
#   the order-embedding branches (unused with these options) dropped.
from __future__ import print_function
from argparse import Namespace

import numpy as np
import torch
import torch.nn as nn


class PVSE(nn.Module):
  def __init__(self, vocab_size, args):
    super(PVSE, self).__init__()
    self.mil = args.num_embeds > 1
    self.img_enc = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, args.embed_size))
    self.embed = nn.Embedding(vocab_size, 300)
    self.txt_enc = nn.GRU(300, args.embed_size, batch_first=True)

  def forward(self, images, sentences, lengths):
    img_emb = nn.functional.normalize(self.img_enc(images), dim=-1)
    out, _ = self.txt_enc(self.embed(sentences))
    txt_emb = nn.functional.normalize(out[torch.arange(out.size(0)), lengths - 1], dim=-1)
    return img_emb, txt_emb, None, None, None, None


def get_test_loader(args, n=240, batch_size=16):
  g = torch.Generator().manual_seed(1)
  imgs = torch.randn(n, 512, generator=g)
  txts = torch.randint(0, args.vocab_size, (n, 20), generator=g)
  lens = torch.randint(5, 21, (n,), generator=g)

  class Loader(list):
    dataset = range(n)
  return Loader([(imgs[i:i + batch_size], txts[i:i + batch_size], lens[i:i + batch_size],
                  list(range(i, min(i + batch_size, n)))) for i in range(0, n, batch_size)])


def encode_data(model, data_loader, use_gpu=False):
  """Encode all images and sentences loadable by data_loader"""
  # switch to evaluate mode
  model.eval()

  use_mil = model.module.mil if hasattr(model, 'module') else model.mil

  # numpy array to keep all the embeddings
  img_embs, txt_embs = None, None
  for i, data in enumerate(data_loader):
    img, txt, txt_len, ids = data
    if torch.cuda.is_available():
      img, txt, txt_len = img.cuda(), txt.cuda(), txt_len.cuda()

    # compute the embeddings
    img_emb, txt_emb, _, _, _, _ = model.forward(img, txt, txt_len)
    del img, txt, txt_len

    # initialize the output embeddings
    if img_embs is None:
      if use_gpu:
        emb_sz = [len(data_loader.dataset), img_emb.size(1), img_emb.size(2)] \
                if use_mil else [len(data_loader.dataset), img_emb.size(1)]
        img_embs = torch.zeros(emb_sz, dtype=img_emb.dtype, requires_grad=False)
        txt_embs = torch.zeros(emb_sz, dtype=txt_emb.dtype, requires_grad=False)
      else:
        emb_sz = (len(data_loader.dataset), img_emb.size(1), img_emb.size(2)) \
                if use_mil else (len(data_loader.dataset), img_emb.size(1))
        img_embs = np.zeros(emb_sz)
        txt_embs = np.zeros(emb_sz)

    # preserve the embeddings by copying from gpu and converting to numpy
    img_embs[ids] = img_emb if use_gpu else img_emb.data.cpu().numpy().copy()
    txt_embs[ids] = txt_emb if use_gpu else txt_emb.data.cpu().numpy().copy()

  return img_embs, txt_embs


def i2t(images, sentences, nreps=1, npts=None, return_ranks=False, order=False, use_gpu=False):
  """
  Images->Text (Image Annotation)
  Images: (nreps*N, K) matrix of images
  Captions: (nreps*N, K) matrix of sentences
  """
  if use_gpu:
    assert not order, 'Order embedding not supported in GPU mode'

  if npts is None:
    npts = int(images.shape[0] / nreps)

  index_list = []
  ranks, top1 = np.zeros(npts), np.zeros(npts)
  for index in range(npts):
    # Get query image
    im = images[nreps * index]
    im = im.reshape((1,) + im.shape)

    # Compute scores
    if use_gpu:
      if len(sentences.shape) == 2:
        sim = im.mm(sentences.t()).view(-1)
      else:
        _, K, D = im.shape
        sim_kk = im.view(-1, D).mm(sentences.view(-1, D).t())
        sim_kk = sim_kk.view(im.size(0), K, sentences.size(0), K)
        sim_kk = sim_kk.permute(0,1,3,2).contiguous()
        sim_kk = sim_kk.view(im.size(0), -1, sentences.size(0))
        sim, _ = sim_kk.max(dim=1)
        sim = sim.flatten()
    else:
      sim = np.tensordot(im, sentences, axes=[2, 2]).max(axis=(0,1,3)).flatten() \
          if len(sentences.shape) == 3 else np.dot(im, sentences.T).flatten()

    if use_gpu:
      _, inds_gpu = sim.sort()
      inds = inds_gpu.cpu().numpy().copy()[::-1]
    else:
      inds = np.argsort(sim)[::-1]
    index_list.append(inds[0])

    # Score
    rank = 1e20
    for i in range(nreps * index, nreps * (index + 1), 1):
      tmp = np.where(inds == i)[0][0]
      if tmp < rank:
        rank = tmp
    ranks[index] = rank
    top1[index] = inds[0]

  # Compute metrics
  r1 = 100.0 * len(np.where(ranks < 1)[0]) / len(ranks)
  r5 = 100.0 * len(np.where(ranks < 5)[0]) / len(ranks)
  r10 = 100.0 * len(np.where(ranks < 10)[0]) / len(ranks)
  medr = np.floor(np.median(ranks)) + 1
  meanr = ranks.mean() + 1
  if return_ranks:
    return (r1, r5, r10, medr, meanr), (ranks, top1)
  else:
    return (r1, r5, r10, medr, meanr)


def t2i(images, sentences, nreps=1, npts=None, return_ranks=False, order=False, use_gpu=False):
  """
  Text->Images (Image Search)
  Images: (nreps*N, K) matrix of images
  Captions: (nreps*N, K) matrix of sentences
  """
  if use_gpu:
    assert not order, 'Order embedding not supported in GPU mode'

  if npts is None:
    npts = int(images.shape[0] / nreps)

  if use_gpu:
    ims = torch.stack([images[i] for i in range(0, len(images), nreps)])
  else:
    ims = np.array([images[i] for i in range(0, len(images), nreps)])

  ranks, top1 = np.zeros(nreps * npts), np.zeros(nreps * npts)
  for index in range(npts):
    # Get query sentences
    queries = sentences[nreps * index:nreps * (index + 1)]

    # Compute scores
    if use_gpu:
      if len(sentences.shape) == 2:
        sim = queries.mm(ims.t())
      else:
        sim_kk = queries.view(-1, queries.size(-1)).mm(ims.view(-1, ims.size(-1)).t())
        sim_kk = sim_kk.view(queries.size(0), queries.size(1), ims.size(0), ims.size(1))
        sim_kk = sim_kk.permute(0,1,3,2).contiguous()
        sim_kk = sim_kk.view(queries.size(0), -1, ims.size(0))
        sim, _ = sim_kk.max(dim=1)
    else:
      sim = np.tensordot(queries, ims, axes=[2, 2]).max(axis=(1,3)) \
          if len(sentences.shape) == 3 else np.dot(queries, ims.T)

    inds = np.zeros(sim.shape)
    for i in range(len(inds)):
      if use_gpu:
        _, inds_gpu = sim[i].sort()
        inds[i] = inds_gpu.cpu().numpy().copy()[::-1]
      else:
        inds[i] = np.argsort(sim[i])[::-1]
      ranks[nreps * index + i] = np.where(inds[i] == index)[0][0]
      top1[nreps * index + i] = inds[i][0]

  # Compute metrics
  r1 = 100.0 * len(np.where(ranks < 1)[0]) / len(ranks)
  r5 = 100.0 * len(np.where(ranks < 5)[0]) / len(ranks)
  r10 = 100.0 * len(np.where(ranks < 10)[0]) / len(ranks)
  medr = np.floor(np.median(ranks)) + 1
  meanr = ranks.mean() + 1
  if return_ranks:
    return (r1, r5, r10, medr, meanr), (ranks, top1)
  else:
    return (r1, r5, r10, medr, meanr)


def evalrank(model, args, split='test'):
  print('Loading dataset')
  data_loader = get_test_loader(args)

  print('Computing results... (eval_on_gpu={})'.format(args.eval_on_gpu))
  img_embs, txt_embs = encode_data(model, data_loader, args.eval_on_gpu)
  n_samples = img_embs.shape[0]

  nreps = 5 if args.data_name == 'coco' else 1
  print('Images: %d, Sentences: %d' % (img_embs.shape[0] / nreps, txt_embs.shape[0]))

  mean_metrics = None

  # no cross-validation, full evaluation
  r, rt = i2t(img_embs, txt_embs, nreps=nreps, return_ranks=True, use_gpu=args.eval_on_gpu)
  ri, rti = t2i(img_embs, txt_embs, nreps=nreps, return_ranks=True, use_gpu=args.eval_on_gpu)
  ar = (r[0] + r[1] + r[2]) / 3
  ari = (ri[0] + ri[1] + ri[2]) / 3
  rsum = r[0] + r[1] + r[2] + ri[0] + ri[1] + ri[2]
  r = (r[0], r[1], r[2], r[3], r[3] / n_samples, r[4], r[4] / n_samples)
  ri = (ri[0], ri[1], ri[2], ri[3], ri[3] / n_samples, ri[4], ri[4] / n_samples)
  print("rsum: %.2f" % rsum)
  print("Average i2t Recall: %.2f" % ar)
  print("Image to text: %.2f %.2f %.2f %.2f (%.2f) %.2f (%.2f)" % r)
  print("Average t2i Recall: %.2f" % ari)
  print("Text to image: %.2f %.2f %.2f %.2f (%.2f) %.2f (%.2f)" % ri)

  return mean_metrics


if __name__ == '__main__':
  torch.manual_seed(0)
  args = Namespace(data_name='f30k', eval_on_gpu=True, num_embeds=1, embed_size=256, vocab_size=1000)
  model = PVSE(args.vocab_size, args)
  # evaluate
  metrics = evalrank(model, args, split='test')
