"""``tilelang.carver.template``: present for imports only (see ``tlc.tilelang.carver``)."""

from . import Unavailable


class MatmulTemplate(Unavailable):
    pass
