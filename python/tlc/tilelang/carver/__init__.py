"""TileLang's carver (its roller: device-aware tile hints) is not part of tlc; tlc ranks a
kernel's tuning space with ``tlc.plan`` instead. The names scripts import exist so that the
scripts import; using one raises ``NotImplementedError`` saying so, never a made-up hint."""

from __future__ import annotations

from typing import Any, NoReturn


def _absent(what: str) -> NoReturn:
    raise NotImplementedError(
        f"{what}: TileLang's carver (roller hints) is not part of tlc; list the configs "
        "yourself, or rank a kernel's T.tunable space with tlc.plan"
    )


class Unavailable:
    """A carver class: constructing one raises ``NotImplementedError``."""

    def __init__(self, *_: Any, **__: Any) -> None:
        _absent(f"tilelang.carver {type(self).__name__}")
