"""TileLang's ``tilelang.utils`` (the parts scripts import): ``tensor``."""
