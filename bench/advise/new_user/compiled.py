"""The user's model as they train it: torch.compile(model), the decoder of decoder.py."""
import torch

# loss_fn and make_batch are this model file's (the capture reads them from it): decoder.py's
from decoder import loss_fn, make_batch, small_or_full  # noqa: F401


def build_model(small=False):
    return torch.compile(small_or_full(small))
