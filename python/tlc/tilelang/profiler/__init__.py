"""TileLang's profiler for tlc kernels: ``kernel.get_profiler(tensor_supply_type=...)``
makes inputs of the kernel's parameter shapes and dtypes, checks the kernel against a
reference program (``assert_allclose``) and times it or any function on the same inputs
(``do_bench``). ``tilelang.profiler.do_bench`` times any function."""

from __future__ import annotations

from functools import partial
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from ..param import KernelParam, bind_shapes
from ..utils.tensor import TensorSupplyType, get_tensor_supply, torch_assert_close
from .bench import do_bench

__all__ = ["Profiler", "do_bench"]


class Profiler:
    """Checks and times one kernel on inputs it makes.

    ``params``: the kernel's tensor parameters; ``result_idx``: those the kernel allocates
    and returns (its ``out_idx``), which are not inputs; ``func``: the kernel."""

    def __init__(
        self,
        params: Sequence[KernelParam],
        result_idx: Sequence[int],
        supply_type: TensorSupplyType,
        func: Callable[..., Any],
    ) -> None:
        self.params = list(params)
        self.result_idx = list(result_idx)
        self.supply_type = supply_type
        self.supply = get_tensor_supply(supply_type)
        self._func = func

    @property
    def func(self) -> Callable[..., Any]:
        """The kernel."""
        return self._func

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._func(*args, **kwargs)

    def _get_params(self, with_output: bool = False) -> List[KernelParam]:
        return [p for i, p in enumerate(self.params) if with_output or i not in self.result_idx]

    def _get_inputs(
        self, with_output: bool = False, dynamic_symbolic_constraints: Optional[Dict[str, int]] = None
    ) -> List[Any]:
        """A new tensor per input parameter (and per output with ``with_output``)."""
        params = self._get_params(with_output)
        if dynamic_symbolic_constraints:
            params = bind_shapes(params, dynamic_symbolic_constraints)
        return [self.supply(p) for p in params]

    def assert_allclose(
        self,
        reference_program: Callable[..., Any],
        input_tensors: Optional[List[Any]] = None,
        atol: float = 1e-2,
        rtol: float = 1e-2,
        max_mismatched_ratio: float = 0.01,
    ) -> None:
        """Runs the kernel and ``reference_program`` on the same inputs (made, or
        ``input_tensors``) and compares their outputs pairwise with ``torch_assert_close``
        (float8 outputs in float32); an output the reference gives as ``None`` is not
        compared."""
        import torch  # type: ignore[import-not-found, unused-ignore]

        ins = self._get_inputs() if input_tensors is None else list(input_tensors)
        ref = _as_list(torch, reference_program(*ins))
        torch.cuda.synchronize()
        out = _as_list(torch, self._func(*ins))
        torch.cuda.synchronize()
        if len(out) != len(ref):
            raise AssertionError(
                f"the kernel returned {len(out)} outputs and the reference program {len(ref)}"
            )
        for lhs, rhs in zip(out, ref):
            if lhs is None or rhs is None:
                continue
            torch_assert_close(
                lhs, rhs, rtol=rtol, atol=atol, max_mismatched_ratio=max_mismatched_ratio,
                base_name="tlc", ref_name="ref",
            )

    def manual_assert_close(
        self,
        reference_program: Callable[..., Any],
        input_tensors: Optional[List[Any]] = None,
        manual_check_prog: Optional[Callable[[List[Any], List[Any]], Any]] = None,
    ) -> None:
        """As ``assert_allclose``, the comparison left to ``manual_check_prog(outs, refs)``."""
        import torch  # type: ignore[import-not-found, unused-ignore]

        if manual_check_prog is None:
            raise TypeError("manual_assert_close needs manual_check_prog")
        ins = self._get_inputs() if input_tensors is None else list(input_tensors)
        ref = _as_list(torch, reference_program(*ins))
        torch.cuda.synchronize()
        out = _as_list(torch, self._func(*ins))
        torch.cuda.synchronize()
        if len(out) != len(ref):
            raise AssertionError(
                f"the kernel returned {len(out)} outputs and the reference program {len(ref)}"
            )
        manual_check_prog(out, ref)

    def assert_consistent(self, repeat: int = 10) -> None:
        """Runs the kernel ``repeat`` more times on the same inputs and asserts every run
        gives the first run's outputs (a data race shows as a difference)."""
        import torch  # type: ignore[import-not-found, unused-ignore]

        ins = self._get_inputs()
        first = [t.clone() for t in _as_list(torch, self._func(*ins))]
        for _ in range(repeat):
            for lhs, rhs in zip(_as_list(torch, self._func(*ins)), first):
                if not torch.equal(lhs, rhs):
                    raise AssertionError("the kernel's outputs differ between runs on the same inputs")

    def run_once(self, func: Optional[Callable[..., Any]] = None) -> Any:
        """``func`` (default: the kernel) once on new inputs."""
        return (func or self._func)(*self._get_inputs())

    def do_bench(
        self,
        func: Optional[Callable[..., Any]] = None,
        warmup: float = 25,
        rep: float = 100,
        n_warmup: int = 0,
        n_repeat: int = 0,
        input_tensors: Optional[List[Any]] = None,
        backend: str = "event",
        quantiles: Optional[Sequence[float]] = None,
        return_mode: str = "mean",
        dynamic_symbolic_constraints: Optional[Dict[str, int]] = None,
        device: Any = None,
        early_stop_baseline: Optional[float] = None,
    ) -> Union[float, List[float]]:
        """Milliseconds per call of ``func`` (default: the kernel) on the profiler's inputs
        (made once; ``input_tensors`` instead; ``dynamic_symbolic_constraints`` gives dims
        known only at launch their values). The rest is ``tilelang.profiler.do_bench``'s."""
        import torch  # type: ignore[import-not-found, unused-ignore]

        def run() -> Union[float, List[float]]:
            if input_tensors is not None:
                ins = list(input_tensors)
            else:
                ins = self._get_inputs(dynamic_symbolic_constraints=dynamic_symbolic_constraints)
            return do_bench(
                partial(func or self._func, *ins), warmup=warmup, rep=rep, _n_warmup=n_warmup,
                _n_repeat=n_repeat, quantiles=quantiles, backend=backend,
                return_mode=return_mode, early_stop_baseline=early_stop_baseline,
            )

        if device is None:
            return run()
        with torch.cuda.device(device):
            return run()


def _as_list(torch: Any, outs: Any) -> List[Any]:
    if outs is None:
        return []
    if isinstance(outs, torch.Tensor):
        return [outs]
    return list(outs)
