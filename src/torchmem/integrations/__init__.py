"""Integrations with host programs: Jupyter/IPython, Lightning and Hugging Face trainers.

Each integration lives in its own module and imports its host (IPython, ``lightning``,
``transformers``) only when that module is imported: ``import torchmem`` never does.

* :mod:`torchmem.integrations.notebook`: ``%load_ext torchmem``, the ``%%torchmem`` cell
  magic and ``%torchmem_doctor``.
* :mod:`torchmem.integrations.lightning`: ``TorchmemCallback`` for ``lightning.Trainer``.
* :mod:`torchmem.integrations.huggingface`: ``TorchmemTrainerCallback`` for
  ``transformers.Trainer``.
"""
