"""gatherx: the ONNX Gather operator for NumPy, PyTorch, JAX and any array-API library."""

from ._api import gather, gather_grad

__all__ = ["__version__", "gather", "gather_grad"]
__version__ = "0.1.0"
