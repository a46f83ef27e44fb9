# Source: https://github.com/eora-ai/torchok/blob/70aad9aeeb1890bf5aac2d981c0fa64b2a745bb4/torchok/metrics/index_base_metric.py
# Adapted excerpt, context file at the parent of https://github.com/eora-ai/torchok/commit/6f58203f11807597e8d3654b6d4bf7b449088bbf
# (trimmed to the code the bug crosses; omitted lines are marked).
import math
from abc import ABC
from enum import Enum
from typing import Callable, Generator, List, Optional, Tuple, Union

import faiss
import numpy as np
import pandas as pd
import torch
from sklearn.preprocessing import normalize
from torchmetrics import Metric

# ... (lines 13-34 omitted)
class IndexBasedMeter(Metric, ABC):
    """Base class for representation metrics.

    Store retrieval vectors and targets during phase in update method. FAISS library is used to build an index
    and search for top-k in it. Supports 2 datasets: classification dataset with targets,
    and representation dataset with scores and queries_idxs tensors.
    Compute method return generator with relevant and closest (FAISS searched) indexes. The relevant index contain
    its relevant index with scores for current query. And the closest contain the closest index with its distance.
    """
    full_state_update: bool = False

    def __init__(self, exact_index: bool, dataset_type: str, metric_distance: str,
                 metric_func: Callable, k_as_target_len: bool = False, k: Optional[int] = None,
                 use_batching_search: bool = True, search_batch_size: Optional[int] = None,
                 normalize_vectors: bool = False, group_averaging: bool = False, raise_empty_query: bool = True,
                 **kwargs):
        # ... (lines 51-81 omitted)
        super().__init__(**kwargs)
        self.exact_index = exact_index

        self.dataset_type = dataset_enum_mapping[dataset_type]
        self.metric_distance = distance_enum_mapping[metric_distance]
        self.metric_func = metric_func
        self.normalize_vectors = normalize_vectors
        self.group_averaging = group_averaging
        self.k_as_target_len = k_as_target_len
        self.use_batching_search = use_batching_search
        self.raise_empty_query = raise_empty_query
        # set search_batch_size as num CPUs if search_batch_size is None
        self.search_batch_size = torch.get_num_threads() if search_batch_size is None else search_batch_size

        # set k as 1 if k is None
        k = 1 if k is None else k
        # as queries vectors can be relevant to other query vectors, so we should search k + 1 and delete first
        # and remove the first found vector because it would be a query
        self.search_k = k + 1
        # but in metric compute study, k must not change
        self.metric_compute_k = k

        self.add_state('vectors', default=[], dist_reduce_fx=None)
        if self.dataset_type == DatasetType.CLASSIFICATION:
            # if classification dataset
            self.add_state('group_labels', default=[], dist_reduce_fx=None)
        else:
            # if representation dataset
            self.add_state('query_idxs', default=[], dist_reduce_fx=None)
            self.add_state('scores', default=[], dist_reduce_fx=None)
            self.add_state('group_labels', default=[], dist_reduce_fx=None)

    def update(self, vectors: torch.Tensor, group_labels: Optional[torch.Tensor] = None,
               query_idxs: Optional[torch.Tensor] = None, scores: Optional[torch.Tensor] = None):
        """Append tensors in storage.

        Args:
            vectors: Often it would be embeddings, size (batch_size, embedding_size).
            group_labels: The labels for every vector in classification mode, size (batch_size).
            query_idxs: Integer tensor where values >= 0 represent indices of queries with corresponding
                vectors in vectors tensor and value -1 indicates that the corresponding vector isn't a query.
            scores: The score tensor, see representation dataset for more information,
                size (batch_size, total_num_queries).

        Raises:
            ValueError: If dataset is of classification type and targets is None, or if dataset is of representation
                type and at least one of scores or query_idxs is None.
        """
        vectors = vectors.detach().cpu()
        self.vectors.append(vectors)
        if self.dataset_type == DatasetType.CLASSIFICATION:
            if group_labels is None:
                raise ValueError("In classification dataset group_labels must be not None.")
            group_labels = group_labels.detach().cpu()
            self.group_labels.append(group_labels)
        else:
            if query_idxs is None:
                raise ValueError("In representation dataset query_numbers must be not None.")
            if scores is None:
                raise ValueError("In representation dataset scores must be not None")

            query_idxs = query_idxs.detach().cpu()
            self.query_idxs.append(query_idxs)

            scores = scores.detach().cpu()
            self.scores.append(scores)

            group_labels = group_labels.detach().cpu()
            self.group_labels.append(group_labels)

    def compute(self) -> float:
        """Compute metric value.

        Firstly it gathers all tensors in storage (done by torchmetrics).
        Then it prepares data, separates query and database vectors.
        Then it builds the FAISS index.
        Then, it creates a generator of relevant and closest arrays.
        Finally, it compute metric.

        Returns:
            metric: Metric value.
        """
        vectors = torch.cat(self.vectors).numpy()
        if self.normalize_vectors:
            vectors = normalize(vectors)

        if self.dataset_type == DatasetType.CLASSIFICATION:
            # if classification dataset
            group_labels = torch.cat(self.group_labels).numpy()
            # prepare data
            relevant_idxs, faiss_vector_idxs, \
                query_row_idxs, query_as_relevant = self.prepare_classification_data(group_labels)
            # mock scores and query column indexes because it belongs to representation data
            scores = None
            query_column_idxs = None
        else:
            # if representation dataset
            scores = torch.cat(self.scores).numpy()
            query_idxs = torch.cat(self.query_idxs).numpy()
            group_labels = torch.cat(self.group_labels).numpy()
            # prepare data
            relevant_idxs, faiss_vector_idxs, query_column_idxs, \
                query_row_idxs, query_as_relevant = self.prepare_representation_data(query_idxs, scores)

        # build index
        vectors = vectors.astype(np.float32)
        index = self.build_index(vectors[faiss_vector_idxs])

        # split query by group_label if metric compute target averaging
        if self.group_averaging:
            uniq_group_labels = np.unique(group_labels)
            group_indexes_split = np.array([np.where(group_labels == label)[0] for label in uniq_group_labels])
        else:
            group_indexes_split = np.arange(len(group_labels))[None]

        # compute metric
        metric = []
        for group_indexes in group_indexes_split:
            curr_target_metric = 0
            query_target_idxs = np.isin(query_row_idxs, group_indexes)
            curr_query_col_idxs = None if query_column_idxs is None else query_column_idxs[query_target_idxs]
            curr_relevant_idxs = relevant_idxs[query_target_idxs]
            curr_query_row_idxs = query_row_idxs[query_target_idxs]
            curr_query_as_relevant = query_as_relevant[query_target_idxs]

            if self.k_as_target_len:
                # + 1 because query can be in index
                # and - count of queries which are not in index
                k = len(group_indexes) + 1 - len(np.where(~curr_query_as_relevant)[0])
            else:
                k = self.search_k

            # create relevant, closest generator
            generator = self.query_generator(index, vectors, curr_relevant_idxs,
                                             curr_query_row_idxs, faiss_vector_idxs,
                                             curr_query_as_relevant, k,
                                             scores, curr_query_col_idxs)
            for batch_size, args in generator:
                curr_target_metric += batch_size * self.metric_func(*args).mean()

            curr_target_metric /= len(curr_query_row_idxs)
            metric.append(curr_target_metric)

        metric = float(np.mean(metric))
        return metric

# ... (lines 228-482 omitted)
