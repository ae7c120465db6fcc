"""``tilelang.carver.roller.rasterization``: present for imports only (see
``tlc.tilelang.carver``)."""

from .. import Unavailable


class NoRasterization(Unavailable):
    pass
