"""What a launch (``Kernel.__call__``) does on every call once its signature is known, kept
to a few attribute reads: the signature's checked launch (``Signature``), the outputs it
allocates with what was looked up once (torch's dtype and device objects, its allocator),
the stream, the loaded module. Nothing here synchronizes or allocates outside torch's
allocator, so a warm launch can be captured in a CUDA graph (``torch.cuda.graph``): the
outputs come from torch's allocator on the capture stream, the kernel goes on torch's
current stream, and the module was loaded by an earlier (uncaptured) call."""

from __future__ import annotations

import atexit
import sys
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import _tensors


class Signature:
    """A launch checked once for one argument signature: what every launch with the same
    dtypes, shapes, strides, devices and dims reuses."""

    __slots__ = ("prepared", "ptx", "device", "outputs", "torch", "loaded", "allocators")

    def __init__(
        self,
        prepared: Any,
        ptx: str,
        device: Optional[int],
        outputs: Tuple[Tuple[int, Tuple[int, ...], str, bool], ...],
        torch: bool,
    ) -> None:
        self.prepared = prepared
        #: The PTX this signature launches: the kernel's, or its variant for the dims'
        #: alignment (``Kernel._aligned``).
        self.ptx = ptx
        #: The given tensors' GPU; ``None`` when no tensor is given (every parameter is an
        #: output): then torch's current device at each call.
        self.device = device
        #: (parameter index, shape, tlc dtype name, zeroed) of each output to allocate.
        self.outputs = outputs
        #: Whether a given tensor is a torch tensor (a subclass too): the launch then goes
        #: on torch's current stream.
        self.torch = torch
        #: The module loaded on ``device`` (a signature with a device only), once made.
        self.loaded: Any = None
        #: (device, [(index, allocator, shape, torch dtype, torch device)]) for the outputs,
        #: once looked up on that device.
        self.allocators: Optional[Tuple[int, List[Tuple[int, Callable[..., Any], Tuple[int, ...], Any, Any]]]] = None


def allocate(sig: Signature, device: int, names: List[str], stream: Optional[int], ptrs: List[int]) -> Dict[int, Any]:
    """The signature's outputs, allocated on ``device`` (zeroed where the kernel reads
    them) on torch's current stream, or on ``stream`` when the launch goes on an explicit
    one; their addresses written into ``ptrs``."""
    out: Dict[int, Any] = {}
    if stream is not None:
        for index, shape, dtype, zeroed in sig.outputs:
            t = _tensors.allocate(shape, dtype, device, zeroed, names[index], stream)
            out[index] = t
            ptrs[index] = t.data_ptr()
        return out
    cached = sig.allocators
    if cached is None or cached[0] != device:
        cached = sig.allocators = (device, _allocators(sig, device, names))
    for index, make, shape, torch_dtype, where in cached[1]:
        t = make(shape, dtype=torch_dtype, device=where)
        out[index] = t
        ptrs[index] = t.data_ptr()
    return out


def _allocators(sig: Signature, device: int, names: List[str]) -> List[Tuple[int, Callable[..., Any], Tuple[int, ...], Any, Any]]:
    made = []
    for index, shape, dtype, zeroed in sig.outputs:
        torch = _tensors._import_torch(names[index])
        torch_dtype = _tensors._torch_dtype(torch, dtype)
        make = torch.zeros if zeroed else torch.empty
        made.append((index, make, shape, torch_dtype, torch.device("cuda", device)))
    return made


#: (the torch module, its raw-stream getter), looked up once per torch module.
_RAW_STREAM: Tuple[Any, Optional[Callable[[int], int]]] = (None, None)


def current_stream(device: int) -> int:
    """torch's current stream on ``device`` (a raw ``CUstream``), as Triton's launcher
    reads it: without building a Stream object."""
    global _RAW_STREAM
    torch = sys.modules.get("torch")
    module, raw = _RAW_STREAM
    if torch is None or module is not torch:
        if torch is None:
            import torch  # type: ignore[import-not-found, no-redef, unused-ignore]
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        _RAW_STREAM = (torch, raw)
    if raw is None:
        return int(torch.cuda.current_stream(device).cuda_stream)
    return int(raw(device))


_EXIT_HOOK = False


def register_exit_hook() -> None:
    """Registers, at the first module load, the exit hook that tells the extension the
    process is exiting (``_at_exit``).

    The Python objects that own modules and device buffers are destroyed during the
    interpreter's finalization, after every exit hook, when the libraries beside tlc may have
    torn down: with torch's profiler (CUPTI) active, unloading a module then crashed the
    process at exit (``double free or corruption``; TileLang's example_gemm with
    ``do_bench(backend="cupti")``, H200, 2026-12-01). From the hook on, dropping them leaves
    the memory to the driver's own teardown at process exit.
    """
    global _EXIT_HOOK
    if not _EXIT_HOOK:
        _EXIT_HOOK = True
        atexit.register(_at_exit)


def _at_exit() -> None:
    from . import _tlc

    _tlc.process_exiting()
