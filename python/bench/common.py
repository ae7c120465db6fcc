"""What the GPU benchmarks of python/bench share: failing loudly, loading the optional
Triton peer, the versions a report names, and printing / writing the report."""

import importlib.metadata
import sys


def fail(message):
    """Prints ``FAIL: message`` and exits 1 (a wrong result is never a number)."""
    print(f"FAIL: {message}")
    sys.exit(1)


def load_triton(wanted, what):
    """(the triton_matmul module or None, a note saying why not); ``what`` is the report's
    part that is then skipped ("row", "column")."""
    if not wanted:
        return None, "triton: skipped (--no-triton)"
    try:
        import triton  # noqa: F401
    except ImportError as e:
        return None, f"triton: not importable ({e}); its {what} is skipped"
    import triton_matmul

    return triton_matmul, None


def versions(torch):
    """The GPU and the versions of torch, Triton and tlc, for a report's title."""

    def version(pkg):
        try:
            return importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"

    return (f"{torch.cuda.get_device_name()}; torch {torch.__version__}, "
            f"triton {version('triton')}, tlc {version('tlc')}")


def publish(report, out):
    """Prints the markdown ``report`` and writes it to ``out`` when given (``--out``)."""
    print()
    print(report, end="")
    if out:
        with open(out, "w") as f:
            f.write(report)
        print(f"wrote {out}")
