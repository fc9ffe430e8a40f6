"""Stub: `index_select_tensor_dict` over a plain dict of tensors (the test's batch)."""

import torch


def index_select_tensor_dict(batch, indices):
    index = torch.tensor(indices, dtype=torch.long)
    return {key: value[index] for key, value in batch.items()}
