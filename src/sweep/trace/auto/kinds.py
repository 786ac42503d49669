"""Which compute kind (sweep.trace.trace.OP_KINDS) an operation's arithmetic is counted as, for numpy's ufuncs and
functions and for torch's aten operators. One count per output element for an elementwise operation, per input
element for a reduction, and per multiply-add for a contraction (a matmul of (m, k) by (k, n) is m*k*n ``fma``).
An operation that only moves data (a copy, a gather, a concatenation, a cast) counts no arithmetic; rounding and
sign-bit operations (``abs``, ``neg``) count as ``sign``; every bitwise operation on words counts as ``xor``.
"""

from __future__ import annotations

_BY_KIND: dict[str, tuple[str, ...]] = {
    "add": ("add", "subtract", "sub", "rsub", "sum", "nansum", "cumsum", "mean", "nanmean"),
    "mul": ("multiply", "mul", "square", "prod", "cumprod", "ldexp"),
    "div": ("divide", "true_divide", "div", "floor_divide", "remainder", "fmod", "reciprocal", "divmod", "mod"),
    "sqrt": ("sqrt", "cbrt", "rsqrt", "hypot", "norm"),
    "exp": (
        *("exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "logaddexp", "logaddexp2", "power", "pow"),
        *("float_power", "sin", "cos", "tan", "arcsin", "arccos", "arctan", "arctan2", "sinh", "cosh", "tanh"),
        *("sigmoid", "softplus", "erf", "gelu", "silu", "softmax", "_softmax", "log_softmax", "_log_softmax"),
        *("logsumexp", "sigmoid_backward", "tanh_backward", "gelu_backward", "silu_backward"),
        *("_softmax_backward_data", "_log_softmax_backward_data"),
    ),
    "cmp": (
        *("less", "less_equal", "greater", "greater_equal", "equal", "not_equal", "lt", "le", "gt", "ge", "eq"),
        *("ne", "logical_and", "logical_or", "logical_xor", "logical_not", "isnan", "isinf", "isfinite"),
        *("signbit", "where", "any", "all", "array_equal", "allclose", "isclose", "masked_fill", "threshold"),
        *("sort", "argsort", "argmax", "argmin", "topk", "unique", "searchsorted", "partition", "argpartition"),
        *("nonzero", "count_nonzero", "flatnonzero", "_unique2", "unique_dim", "nll_loss_forward"),
        *("nll_loss_backward",),
    ),
    "max": (
        *("maximum", "minimum", "fmax", "fmin", "clip", "clamp", "clamp_min", "clamp_max", "relu", "amax"),
        *("amin", "max", "min", "threshold_backward", "hardtanh", "nanmax", "nanmin", "ptp"),
    ),
    "sign": ("sign", "absolute", "abs", "fabs", "negative", "neg", "positive", "copysign", "sgn"),
    "xor": (
        *("bitwise_xor", "bitwise_and", "bitwise_or", "invert", "bitwise_not", "left_shift", "right_shift"),
        *("bitwise_left_shift", "bitwise_right_shift", "bitwise_count", "__xor__", "__and__", "__or__"),
    ),
    "fma": (
        *("matmul", "dot", "vdot", "inner", "tensordot", "einsum", "mm", "bmm", "addmm", "addmv", "mv"),
        *("baddbmm", "addbmm", "linear", "vecdot", "matvec", "vecmat", "var", "std", "lerp", "addcmul", "addcdiv"),
    ),
}
KIND: dict[str, str] = {op: kind for kind, ops in _BY_KIND.items() for op in ops}
# operations whose count is one per element of their input (a reduction, a sort) rather than of their output
PER_INPUT: frozenset[str] = frozenset(
    (
        *("sum", "nansum", "mean", "nanmean", "prod", "any", "all", "amax", "amin", "max", "min", "nanmax"),
        *("nanmin", "ptp", "argmax", "argmin", "count_nonzero", "nonzero", "flatnonzero", "array_equal"),
        *("allclose", "norm", "var", "std", "logsumexp", "unique", "_unique2", "unique_dim", "nll_loss_forward"),
    )
)
# comparison sorts: n log2 n comparisons for n input elements
SORTS: frozenset[str] = frozenset(("sort", "argsort", "topk", "unique", "_unique2", "unique_dim", "msort"))


def arithmetic(op: str, n_in: int, n_out: int) -> tuple[str, int] | None:
    """(kind, count) of a non-contracting operation ``op`` whose largest input has ``n_in`` elements and whose
    outputs have ``n_out``; None for an operation that only moves data."""
    kind = KIND.get(op)
    if kind is None:
        return None
    if op in SORTS:
        return kind, n_in * max(1, (n_in - 1).bit_length())
    return kind, n_in if op in PER_INPUT else n_out
