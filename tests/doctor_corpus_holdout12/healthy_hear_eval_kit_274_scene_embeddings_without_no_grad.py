# Source: https://github.com/hearbenchmark/hear-eval-kit/pull/274
#   code: heareval/embeddings/task_embeddings.py (Embedding.as_tensor,
#   Embedding.get_scene_embedding_as_numpy, save_scene_embedding_and_labels and the batch loop
#   of task_embeddings) at 325644f^, the parent of the commit "Fixes for embedding memory usage."
# Adapted: the torch branch of Embedding and the scene-embedding loop kept as they were (the
#   tensorflow branch, metadata files and the event-embedding branch dropped; tqdm dropped); the
#   hearbaseline module (load_model, get_scene_embeddings) replaced by a small stand-in with the
#   same interface (a conv front end over 16 kHz audio, mean-pooled 128-d embedding); the task's
#   dataloader by 40 batches of 8 random one-second clips with file names; the embeddings are
#   written to a temporary directory as in the original; cpu, seeded.
import json
import tempfile
import types
from pathlib import Path

import numpy as np
import torch

TORCH = "torch"


class HearModel(torch.nn.Module):
    sample_rate = 16000

    def __init__(self):
        super().__init__()
        self.frontend = torch.nn.Sequential(
            torch.nn.Conv1d(1, 64, 400, stride=160), torch.nn.ReLU(),
            torch.nn.Conv1d(64, 128, 3, padding=1), torch.nn.ReLU())

    def forward(self, audio):
        return self.frontend(audio.unsqueeze(1))


def load_model(model_file_path=""):
    return HearModel()


def get_scene_embeddings(audio, model):
    return model(audio).mean(dim=-1)


hearbaseline = types.SimpleNamespace(__name__="hearbaseline", load_model=load_model,
                                     get_scene_embeddings=get_scene_embeddings)


class Embedding:
    def __init__(self, module, model_path=None, model_options=None):
        self.module = module
        if model_options is None:
            model_options = {}
        self.model = self.module.load_model(**model_options)
        if isinstance(self.model, torch.nn.Module):
            self.type = TORCH
            self.device = "cpu"
            self.model.to(self.device)
        else:
            raise TypeError(f"Unsupported model type received: {type(self.model)}")

    @property
    def sample_rate(self):
        return self.model.sample_rate

    def as_tensor(self, x):
        if self.type == TORCH:
            if isinstance(x, np.ndarray):
                x = torch.tensor(x, device=self.device)
            elif isinstance(x, torch.Tensor):
                x = x.to(self.device)
            else:
                raise TypeError("Input must be one of np.ndarray or torch.Tensor")
        return x

    def get_scene_embedding_as_numpy(self, audio):
        audio = self.as_tensor(audio)
        if self.type == TORCH:
            embeddings = self.module.get_scene_embeddings(  # type: ignore
                audio, self.model
            )
            return embeddings.detach().cpu().numpy()
        else:
            raise NotImplementedError("Unknown type")


def save_scene_embedding_and_labels(embeddings, labels, filenames, outdir):
    assert len(embeddings) == len(filenames)
    assert len(labels) == len(filenames)
    for i, filename in enumerate(filenames):
        out_file = outdir.joinpath(f"{filename}")
        np.save(f"{out_file}.embedding.npy", embeddings[i])
        json.dump(labels[i], open(f"{out_file}.target-labels.json", "w"))


torch.manual_seed(0)
rng = np.random.default_rng(0)
embedding = Embedding(hearbaseline)
split_data = {f"clip{i:04d}.wav": [str(int(rng.integers(0, 10)))] for i in range(320)}
names = list(split_data)
dataloader = [(rng.standard_normal((8, embedding.sample_rate)).astype(np.float32), tuple(names[b:b + 8]))
              for b in range(0, len(names), 8)]

with tempfile.TemporaryDirectory() as tmp:
    outdir = Path(tmp)
    for step, (audios, filenames) in enumerate(dataloader):
        labels = [split_data[file] for file in filenames]
        embeddings = embedding.get_scene_embedding_as_numpy(audios)
        save_scene_embedding_and_labels(embeddings, labels, filenames, outdir)
        if step % 10 == 0:
            print(step, embeddings.shape, len(list(outdir.iterdir())))
