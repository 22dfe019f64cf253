"""A stride-1 NHWC convolution whose gradient XLA:CPU compiles well inside loops.

Why this exists: the training iteration runs its optimizer updates inside
``jax.lax.scan``. On XLA:CPU (jax 0.10.2), the two convolutions of a convolution's
gradient (input and kernel gradients) are laid out canonically, and so run by the
Eigen convolution kernels, only in the entry computation: inside a ``while`` body they
keep autodiff's non-canonical dimension labels (e.g. ``f01b_i01o->01bf`` for the kernel
gradient) and are emitted as plain loops, 15-40x slower. Measured on 2 cores, a
2-block x 32-channel ResNet update at batch 256 on 11x11 Hex: 0.15 s jitted alone,
~4.4 s per update inside the scan (results/bench/README.md).

``explicit_gradient_conv`` computes the same two gradients in forms XLA:CPU runs
well anywhere: the input gradient as a convolution already in the canonical
``b01f_01io->b01f`` form (the form XLA's own canonicalization produces at the top
level), the kernel gradient as ``KH`` matrix products over the output cells (2.5x
faster on this CPU than the canonicalized convolution XLA uses at the top level, whose
"kernel" is the whole ``[H', W', B]`` gradient). The values agree with ``jax.grad`` of
``lax.conv_general_dilated`` up to float summation order (tests/test_conv.py).

``CONV_GRADIENTS`` names the static choice (``network.conv_gradient``): ``"xla"``
(autodiff of ``lax.conv_general_dilated``), ``"explicit"`` (this module), or
``"auto"``: ``"explicit"`` on the CPU, ``"xla"`` elsewhere (GPU and TPU compilers pick
their own convolution layouts; there the explicit transposes would only cost memory
traffic).

Shapes: ``B`` batch, ``H, W`` board, ``C`` input channels, ``O`` output channels,
``KH, KW`` the kernel window.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

CONV_GRADIENTS = ("auto", "xla", "explicit")

_NHWC_HWIO = ("NHWC", "HWIO", "NHWC")


def _same_padding(kernel_shape: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """``lax``'s ``"SAME"`` padding for stride 1: ``((k - 1) // 2, k - 1 - (k - 1) // 2)``."""
    return tuple(((k - 1) // 2, k - 1 - (k - 1) // 2) for k in kernel_shape)


def _conv(x: jax.Array, w: jax.Array, padding: tuple[tuple[int, int], ...],
          precision: Any) -> jax.Array:
    return jax.lax.conv_general_dilated(
        x, w, (1, 1), padding, dimension_numbers=_NHWC_HWIO, precision=precision
    )


@functools.cache
def _make_explicit_conv(padding: tuple[tuple[int, int], ...], precision: Any) -> Callable:
    """The custom-VJP convolution for one static padding and precision (cached)."""

    @jax.custom_vjp
    def conv(x: jax.Array, w: jax.Array) -> jax.Array:
        return _conv(x, w, padding, precision)

    def forward(x: jax.Array, w: jax.Array) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
        return _conv(x, w, padding, precision), (x, w)

    def backward(residuals: tuple[jax.Array, jax.Array], grad: jax.Array):
        x, w = residuals  # [B, H, W, C], [KH, KW, C, O]; grad [B, H', W', O]
        kernel_h, kernel_w = w.shape[:2]
        # Input gradient: the output gradient convolved with the flipped kernel
        # (input and output channels swapped), padded by the complement.
        flipped = jnp.flip(w, (0, 1)).transpose(0, 1, 3, 2)  # [KH, KW, O, C]
        complement = (
            (kernel_h - 1 - padding[0][0], kernel_h - 1 - padding[0][1]),
            (kernel_w - 1 - padding[1][0], kernel_w - 1 - padding[1][1]),
        )
        grad_x = _conv(grad, flipped, complement, precision)
        # Kernel gradient dw[i, j, c, o] = sum_{b, h, w} xpad[b, h + i, w + j, c]
        # grad[b, h, w, o]: per kernel row i, one matrix product over the N = B H' W'
        # output cells of the row's KW shifted inputs [N, KW C] with grad [N, O].
        _, out_h, out_w, out_c = grad.shape
        padded = jnp.pad(x, ((0, 0), padding[0], padding[1], (0, 0)))
        cells = grad.reshape(-1, out_c)  # [N, O]
        rows = []
        for i in range(kernel_h):
            shifted = jnp.concatenate(
                [padded[:, i:i + out_h, j:j + out_w, :] for j in range(kernel_w)], axis=-1
            ).reshape(cells.shape[0], -1)  # [N, KW C]
            product = jax.lax.dot_general(shifted, cells, (((0,), (0,)), ((), ())),
                                          precision=precision)  # [KW C, O]
            rows.append(product.reshape(kernel_w, x.shape[-1], out_c))
        grad_w = jnp.stack(rows)  # [KH, KW, C, O]
        return grad_x.astype(x.dtype), grad_w.astype(w.dtype)

    conv.defvjp(forward, backward)
    return conv


def explicit_gradient_conv(
    lhs: jax.Array,
    rhs: jax.Array,
    window_strides: Sequence[int],
    padding: str | Sequence[tuple[int, int]],
    lhs_dilation: Sequence[int] | None = None,
    rhs_dilation: Sequence[int] | None = None,
    dimension_numbers: Any = None,
    feature_group_count: int = 1,
    precision: Any = None,
    **unused: Any,
) -> jax.Array:
    """``lax.conv_general_dilated`` for stride 1, NHWC x HWIO, with explicit gradients.

    Takes ``lax.conv_general_dilated``'s arguments (flax's ``nn.Conv`` passes them
    through its ``conv_general_dilated`` attribute) and supports what the ResNet uses:
    ``lhs [B, H, W, C]``, ``rhs [KH, KW, C, O]``, stride 1, no dilation, one feature
    group, ``"SAME"``, ``"VALID"`` or explicit padding. Anything else raises
    ``ValueError``. Returns ``[B, H', W', O]``.
    """
    if unused:
        raise ValueError(f"explicit_gradient_conv: unsupported arguments {sorted(unused)}")
    if tuple(window_strides) != (1, 1):
        raise ValueError(f"explicit_gradient_conv: strides must be (1, 1), got {window_strides}")
    for name, dilation in (("lhs_dilation", lhs_dilation), ("rhs_dilation", rhs_dilation)):
        if dilation is not None and tuple(dilation) != (1, 1):
            raise ValueError(f"explicit_gradient_conv: {name} must be (1, 1), got {dilation}")
    if feature_group_count != 1:
        raise ValueError("explicit_gradient_conv: feature_group_count must be 1")
    if lhs.ndim != 4 or rhs.ndim != 4:
        raise ValueError("explicit_gradient_conv: needs 4-D NHWC inputs and HWIO kernels")
    expected = jax.lax.conv_dimension_numbers(lhs.shape, rhs.shape, _NHWC_HWIO)
    if dimension_numbers is not None and jax.lax.conv_dimension_numbers(
        lhs.shape, rhs.shape, dimension_numbers
    ) != expected:
        raise ValueError("explicit_gradient_conv: dimension numbers must be NHWC, HWIO, NHWC")
    if isinstance(padding, str):
        if padding == "SAME":
            pads = _same_padding(rhs.shape[:2])
        elif padding == "VALID":
            pads = ((0, 0), (0, 0))
        else:
            raise ValueError(f"explicit_gradient_conv: padding {padding!r} is not SAME or VALID")
    else:
        pads = tuple((int(low), int(high)) for low, high in padding)
    return _make_explicit_conv(pads, precision)(lhs, rhs)


def resolve_conv_gradient(choice: str, platform: str | None = None) -> str:
    """``"xla"`` or ``"explicit"`` for ``choice`` (``CONV_GRADIENTS``) on ``platform``.

    ``"auto"`` is ``"explicit"`` on ``"cpu"`` and ``"xla"`` elsewhere; ``platform`` None
    means ``jax.default_backend()``.
    """
    if choice not in CONV_GRADIENTS:
        raise ValueError(f"conv_gradient must be one of {CONV_GRADIENTS}, got {choice!r}")
    if choice != "auto":
        return choice
    platform = jax.default_backend() if platform is None else platform
    return "explicit" if platform == "cpu" else "xla"


def conv_function(choice: str) -> Callable | None:
    """The ``conv_general_dilated`` to give flax's ``nn.Conv`` for a resolved choice
    (None: flax's default, ``lax.conv_general_dilated``)."""
    return explicit_gradient_conv if resolve_conv_gradient(choice) == "explicit" else None
