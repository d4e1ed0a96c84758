"""The tensor types whose CPU memory gatherx reads directly, as NumPy arrays."""

from __future__ import annotations

import torch

#: Plain tensors and parameters: subclasses with their own __torch_function__ (FakeTensor
#: included) take the flow's general reads.
PLAIN_TYPES = frozenset({torch.Tensor, torch.nn.Parameter})
