"""Type stubs of the extension module ``tlc._tlc`` (python/src). The documented API is
``tlc`` itself; these are its building blocks."""

from typing import Dict, List, Optional, Tuple

class CompileError(Exception):
    """A kernel the compiler refuses; the message is the rendered diagnostic."""

class LaunchError(RuntimeError):
    """A launch refused by the runtime or failed in the CUDA driver."""

class Compiled:
    ptx: str
    manifest_json: str
    target: str
    def stages(self) -> List[str]: ...
    def ir(self, stage: str) -> str: ...
    def variant(self, multiples: List[Tuple[str, int]]) -> "Compiled": ...
    def interpret(
        self, inputs: Dict[str, bytes], dims: Dict[str, int], seed: int = 0
    ) -> List[Tuple[str, bytes]]: ...

class Prepared:
    outputs: List[Tuple[int, List[int], str, bool]]
    dims: List[Tuple[str, int]]

def prepare(
    ptx: str,
    specs: List[Optional[Tuple[str, List[int], Optional[List[int]]]]],
    dims: List[Tuple[str, int]],
) -> Prepared: ...

class Loaded:
    device_name: str
    def __init__(self, ptx: str, ordinal: int) -> None: ...
    def run(self, prepared: Prepared, ptrs: List[int], stream: int) -> None: ...

def compile(name: str, text: str, defines: List[str], target: Optional[str] = None) -> Compiled: ...
def interpret(
    name: str, text: str, defines: List[str], inputs: Dict[str, bytes], seed: int = 0
) -> List[Tuple[str, bytes]]: ...
def param_names(name: str, text: str) -> List[str]: ...
def plan(
    name: str, text: str, defines: List[str], target: str, sms: Optional[int] = None
) -> str: ...
def driver_available() -> bool: ...
def process_exiting() -> None: ...
def tune(
    name: str,
    text: str,
    defines: List[str],
    target: Optional[str] = None,
    top: Optional[int] = None,
    warmup: int = 10,
    iters: int = 50,
    seed: int = 0,
    store: bool = True,
) -> str: ...
def language_names() -> List[str]: ...
def language_declines(name: str) -> bool: ...
