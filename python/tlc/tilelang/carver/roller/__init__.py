"""``tilelang.carver.roller``: present for imports only (see ``tlc.tilelang.carver``)."""
