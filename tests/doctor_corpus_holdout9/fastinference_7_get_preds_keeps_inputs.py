# Source: https://github.com/muellerzr/fastinference/issues/7
#   code: get_preds, _fully_decode and _decode_loss of fastinference/inference/inference.py
#   at 8532bd6 (the version the issue links): the inputs of every batch are stored in `inps`
#   whether or not fully_decoded asks for them
# Adapted: fastai's Learner, DataLoaders and loss function replaced by minimal stand-ins with
#   the used attributes (dls.n_inp, dls[ds_idx].new, dls.vocab, model, loss_func.decodes and
#   .activation); typedispatch dropped (one _fully_decode); the EfficientNet by a small
#   convolutional classifier; a test set of 40 batches of 16 random 3x64x64 images made batch
#   by batch as a loader reads them; get_preds
#   called with its defaults (fully_decoded=False) on two test sets; cpu, seeded.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import tensor


class CrossEntropyFlat:
    def __call__(self, out, targ):
        return F.cross_entropy(out, targ)

    def decodes(self, x):
        return x.argmax(dim=-1)

    def activation(self, x):
        return F.softmax(x, dim=-1)


class DataLoader(list):
    def new(self, shuffle=False, drop_last=False):
        return self

    def decode(self, b):
        return b


class TfmdDL(DataLoader):
    "A test set read batch by batch, as the loader does from image files"
    def __init__(self, n_batches, bs=16):
        super().__init__()
        self.n_batches, self.bs = n_batches, bs

    def __iter__(self):
        for _ in range(self.n_batches):
            yield (torch.randn(self.bs, 3, 64, 64),)


class DataLoaders(list):
    n_inp = 1
    vocab = ['cat', 'dog', 'bird', 'fish', 'frog', 'horse', 'ship', 'truck', 'plane', 'car']


class Learner:
    def __init__(self, dls, model, loss_func):
        self.dls, self.model, self.loss_func = dls, model, loss_func


def _fully_decode(dl, inps, outs):
    "Attempt to fully decode the `inp"
    inps = dl.decode(inps)
    dec = []
    for d in inps:
        for e in d:
            dec.append(e)
    outs.insert(len(outs), dec)
    return outs


def _decode_loss(vocab, dec_out, outs):
    i2c, dec2c = {}, []
    try:
        for i, vocab in enumerate(list(vocab)):
            i2c[i] = vocab
        for i, item in enumerate(dec_out):
            dec2c.append(i2c[int(item)])
        dec_out = dec2c
        outs.insert(0, dec_out)
    except:
        outs.insert(0, dec_out)
    return outs


def get_preds(x: Learner, ds_idx=1, dl=None, raw_outs=False, decoded_loss=True, fully_decoded=False,
              **kwargs):
    "Get predictions with possible decoding"
    inps, outs, dec_out, raw, n_inp, is_multi = [], [], [], [], x.dls.n_inp, False
    if dl is None: dl = x.dls[ds_idx].new(shuffle=False, drop_last=False)
    if n_inp > 1:
        is_multi = True
        [inps.append([]) for _ in range(n_inp)]
    x.model.eval()
    for batch in dl:
        with torch.no_grad():
            if is_multi:
                for i in range(n_inp):
                    inps[i].append(batch[i])
            else:
                inps.append(batch[:n_inp])
            out = x.model(*batch[:n_inp])
            raw.append(out)
            if decoded_loss or fully_decoded:
                dec_out.append(x.loss_func.decodes(out))
    raw = torch.cat(raw, dim=0).cpu().numpy()
    if fully_decoded or decoded_loss:
        dec_out = torch.cat(dec_out, dim=0)
    if not raw_outs:
        try: outs.insert(0, x.loss_func.activation(tensor(raw)).numpy())
        except: outs.insert(0, dec_out)
    else:
        outs.insert(0, raw)
    if fully_decoded: outs = _fully_decode(x.dls[0], inps, outs)
    if decoded_loss: outs = _decode_loss(x.dls.vocab, dec_out, outs)
    return outs


torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU(),
                      nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))
train_dl = DataLoader([(torch.randn(16, 3, 64, 64), torch.randint(0, 10, (16,)))])
valid_dl = DataLoader([(torch.randn(16, 3, 64, 64), torch.randint(0, 10, (16,))) for _ in range(4)])
learn = Learner(DataLoaders([train_dl, valid_dl]), model, CrossEntropyFlat())
for _ in range(2):
    test_dl = TfmdDL(40)
    outs = get_preds(learn, dl=test_dl)
    print(len(outs[0]), outs[1].shape)
