"""The package imports and compiles with no CUDA: nothing at import time loads the driver."""

import subprocess
import sys

import tlc


def test_import_needs_no_cuda_and_has_the_documented_api():
    # A fresh interpreter with no GPU library on the search path: importing must not try.
    code = (
        "import tlc, sys\n"
        "names = ['compile', 'interpret', 'plan', 'Kernel', 'CompileError', 'LaunchError',"
        " 'driver_available', 'tune']\n"
        "missing = [n for n in names if not hasattr(tlc, n)]\n"
        "assert not missing, missing\n"
        "assert issubclass(tlc.CompileError, Exception)\n"
        "assert issubclass(tlc.LaunchError, RuntimeError)\n"
        "assert 'torch' not in sys.modules and 'numpy' not in sys.modules\n"
        "print('ok')\n"
    )
    env = {"LD_LIBRARY_PATH": "", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_the_package_is_typed():
    import importlib.resources

    import tlc

    assert (importlib.resources.files(tlc) / "py.typed").is_file()
    assert (importlib.resources.files(tlc) / "_tlc.pyi").is_file()
    assert tlc.compile.__doc__ and tlc.interpret.__doc__ and tlc.Kernel.ir.__doc__


def test_the_version_is_the_installed_wheels():
    import re
    from importlib.metadata import version

    assert tlc.__version__ == version("tlc")
    assert re.fullmatch(r"\d+\.\d+\.\d+", tlc.__version__)
