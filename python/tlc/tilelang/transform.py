"""``tilelang.transform``: ``PassConfigKey`` (the names of ``pass_configs``), as TileLang
exports it here too. tlc's passes are its own; ``pass_configs.py`` says which keys it
honors."""

from .pass_configs import PassConfigKey  # noqa: F401
