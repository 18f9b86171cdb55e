"""torch Dataset classes for the benchmarks; imported only when torch is installed."""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import Dataset, IterableDataset, get_worker_info


class ArrayRows(Dataset):
    """Rows of parallel arrays; `__getitems__` lets the DataLoader fetch a whole batch with one gather."""

    def __init__(self, *arrays: np.ndarray):
        self.arrays = arrays

    def __len__(self) -> int:
        return len(self.arrays[0])

    def __getitem__(self, i):
        return tuple(a[i] for a in self.arrays)

    def __getitems__(self, indices):
        index = np.asarray(indices)
        return tuple(a[index] for a in self.arrays)


class FilteredScaledRows(IterableDataset):
    """w1 per element: map (x - 0.5) * 2 and drop labels divisible by 3, before batching."""

    def __init__(self, x: np.ndarray, y: np.ndarray):
        self.x, self.y = x, y

    def __iter__(self):
        info = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        x, y = self.x, self.y
        for i in range(start, len(y), step):
            label = y[i]
            if label % 3 != 0:
                yield (x[i] - 0.5) * 2.0, label


class AugmentedImages(Dataset):
    """w4 per item: random crop, random horizontal flip and normalize one image with torch ops."""

    def __init__(self, images: np.ndarray, labels: np.ndarray, size: int,
                 mean: np.ndarray, std: np.ndarray):
        self.images = torch.from_numpy(images)
        self.labels = labels
        self.size = size
        self.mean = torch.from_numpy(mean)
        self.std = torch.from_numpy(std)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i):
        image = self.images[i]
        height, width = image.shape[0], image.shape[1]
        top = int(torch.randint(height - self.size + 1, ()))
        left = int(torch.randint(width - self.size + 1, ()))
        crop = image[top:top + self.size, left:left + self.size]
        if bool(torch.randint(2, ())):
            crop = torch.flip(crop, dims=(1,))
        return (crop.to(torch.float32) - self.mean) / self.std, self.labels[i]


def to_tensors(batch):
    """Collate for the w1 batched rows: map and filter a fetched batch, hand back tensors."""
    x, y = batch
    keep = y % 3 != 0
    return torch.from_numpy((x[keep] - 0.5) * 2.0), torch.from_numpy(y[keep])


def scaled_tensors(batch):
    """Collate for w6: map a fetched batch to (x - 0.5) * 2 in float32, hand back tensors."""
    x, y = batch
    return torch.from_numpy((x - np.float32(0.5)) * np.float32(2.0)), torch.from_numpy(y)
