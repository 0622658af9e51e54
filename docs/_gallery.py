"""Helpers for the sphinx-gallery build (importable from conf.py's folder)."""


def reset_torch(gallery_conf, fname):
    """Before each example: one torch thread (the digits nets are small)."""
    import torch

    torch.set_num_threads(1)
