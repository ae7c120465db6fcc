"""``tilelang.testing`` as TileLang's example scripts use it: ``set_random_seed`` (Python's,
NumPy's and torch's generators) and ``main`` (runs the calling file's tests with pytest)."""

from __future__ import annotations

import inspect
import random
import sys


def set_random_seed(seed: int = 42) -> None:
    """Seeds Python's ``random``, NumPy's global generator and torch's (CUDA's too, when
    torch sees a GPU); a library that is not installed is skipped."""
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed)
    except ImportError:
        pass
    try:
        import torch  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def main() -> None:
    """Runs the tests of the file that calls it (pytest), exiting with pytest's status."""
    import pytest

    test_file = inspect.getsourcefile(sys._getframe(1))
    sys.exit(pytest.main([str(test_file)] + sys.argv[1:]))
