"""``tilelang.carver.arch``: present for imports only (see ``tlc.tilelang.carver``)."""

from . import Unavailable


class CUDA(Unavailable):
    pass


class CDNA(Unavailable):
    pass
