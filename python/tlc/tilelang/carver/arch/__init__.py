"""``tilelang.carver.arch``: ``driver`` (the device's properties) works; the architecture
classes are present for imports only (see ``tlc.tilelang.carver``)."""

from .. import Unavailable
from . import driver  # noqa: F401


class CUDA(Unavailable):
    pass


class CDNA(Unavailable):
    pass
