"""Collectors: readings on every device, Tracker, Monitor, census, autograd-graph walks.

These modules touch live tensors and import torch. They produce the plain records of
:mod:`torchmem.model` and never keep the user's tensors alive.
"""
