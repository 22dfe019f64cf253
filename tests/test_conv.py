"""The explicit-gradient convolution (nets/conv.py) against XLA's own autodiff."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from curiosity_search.nets import conv as conv_lib
from curiosity_search.nets.models import make_network

_DN = ("NHWC", "HWIO", "NHWC")


def _xla_conv(x, w, padding):
    return jax.lax.conv_general_dilated(x, w, (1, 1), padding, dimension_numbers=_DN)


def _explicit_conv(x, w, padding):
    return conv_lib.explicit_gradient_conv(x, w, (1, 1), padding, dimension_numbers=_DN)


@pytest.mark.parametrize(
    "kernel, padding",
    [((3, 3), "SAME"), ((1, 1), "SAME"), ((3, 3), "VALID"), ((3, 2), ((2, 0), (1, 1))),
     ((2, 2), "SAME")],
)
def test_values_and_gradients_match_autodiff(kernel, padding):
    kx, kw, kg = jax.random.split(jax.random.key(0), 3)
    x = jax.random.normal(kx, (3, 5, 4, 6))
    w = jax.random.normal(kw, kernel + (6, 7))
    out_ref = _xla_conv(x, w, padding)
    out = _explicit_conv(x, w, padding)
    np.testing.assert_allclose(out, out_ref, rtol=1e-5, atol=1e-5)
    cotangent = jax.random.normal(kg, out_ref.shape)
    loss = lambda f: lambda x, w: jnp.sum(f(x, w, padding) * cotangent)
    grads_ref = jax.grad(loss(_xla_conv), argnums=(0, 1))(x, w)
    grads = jax.grad(loss(_explicit_conv), argnums=(0, 1))(x, w)
    for got, want in zip(grads, grads_ref, strict=True):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_bfloat16_gradients_keep_dtypes():
    x = jnp.ones((2, 3, 3, 4), jnp.bfloat16)
    w = jnp.ones((3, 3, 4, 5), jnp.bfloat16)
    gx, gw = jax.grad(lambda x, w: jnp.sum(_explicit_conv(x, w, "SAME").astype(jnp.float32)),
                      argnums=(0, 1))(x, w)
    assert gx.dtype == jnp.bfloat16 and gw.dtype == jnp.bfloat16
    rx, rw = jax.grad(lambda x, w: jnp.sum(_xla_conv(x, w, "SAME").astype(jnp.float32)),
                      argnums=(0, 1))(x, w)
    np.testing.assert_allclose(gx.astype(np.float32), rx.astype(np.float32), rtol=1e-2)
    np.testing.assert_allclose(gw.astype(np.float32), rw.astype(np.float32), rtol=1e-2)


@pytest.mark.parametrize("bad", [
    {"window_strides": (2, 2)},
    {"rhs_dilation": (2, 1)},
    {"feature_group_count": 2},
    {"padding": "CIRCULAR"},
])
def test_unsupported_arguments_are_refused(bad):
    args = {"window_strides": (1, 1), "padding": "SAME"} | bad
    x, w = jnp.ones((1, 4, 4, 2)), jnp.ones((3, 3, 2, 2))
    with pytest.raises(ValueError, match="explicit_gradient_conv"):
        conv_lib.explicit_gradient_conv(x, w, args.pop("window_strides"), args.pop("padding"),
                                        **args)


def test_resolve_conv_gradient():
    assert conv_lib.resolve_conv_gradient("auto", "cpu") == "explicit"
    assert conv_lib.resolve_conv_gradient("auto", "gpu") == "xla"
    assert conv_lib.resolve_conv_gradient("auto", "tpu") == "xla"
    assert conv_lib.resolve_conv_gradient("xla", "cpu") == "xla"
    assert conv_lib.resolve_conv_gradient("explicit", "gpu") == "explicit"
    with pytest.raises(ValueError, match="conv_gradient"):
        conv_lib.resolve_conv_gradient("fast")


def _network_and_batch(conv_gradient):
    net = make_network("resnet", 1, 8, 10, value_head="beta", action_values=True,
                       conv_gradient=conv_gradient)
    obs = jax.random.normal(jax.random.key(1), (4, 3, 3, 4))
    return net, obs


def _loss(net):
    def loss(params, obs):
        out = net.apply(params, obs)
        return (jnp.sum(out.policy_logits ** 2) + jnp.sum(out.value_belief)
                + jnp.sum(out.action_beliefs))
    return loss


def test_network_parameters_outputs_and_gradients_do_not_depend_on_the_choice():
    net_xla, obs = _network_and_batch("xla")
    net_explicit, _ = _network_and_batch("explicit")
    params = net_xla.init(jax.random.key(0), obs)
    params_explicit = net_explicit.init(jax.random.key(0), obs)
    assert jax.tree.structure(params) == jax.tree.structure(params_explicit)
    for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(params_explicit), strict=True):
        np.testing.assert_array_equal(a, b)
    out_a, out_b = net_xla.apply(params, obs), net_explicit.apply(params, obs)
    np.testing.assert_allclose(out_a.policy_logits, out_b.policy_logits, rtol=1e-6, atol=1e-6)
    grads_a = jax.grad(_loss(net_xla))(params, obs)
    grads_b = jax.grad(_loss(net_explicit))(params, obs)
    for a, b in zip(jax.tree.leaves(grads_a), jax.tree.leaves(grads_b), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def _conv_labels_in_scanned_update(conv_gradient):
    net, obs = _network_and_batch(conv_gradient)
    params = net.init(jax.random.key(0), obs)
    grad = jax.grad(_loss(net))

    def updates(params):
        def step(params, _):
            return jax.tree.map(lambda p, g: p - 1e-3 * g, params, grad(params, obs)), None

        return jax.lax.scan(step, params, None, length=2)[0]

    text = jax.jit(updates).lower(params).compile().as_text()
    return re.findall(r"convolution\(.*?dim_labels=(\S+?)[,\s]", text)


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="XLA:CPU layout check")
def test_explicit_gradients_compile_to_canonical_convolutions_inside_a_scan():
    """The point of the module: inside a loop every convolution, forward and backward,
    is in the canonical form XLA:CPU hands to Eigen."""
    labels = _conv_labels_in_scanned_update("explicit")
    assert labels, "no convolution found in the compiled program"
    assert set(labels) == {"b01f_01io->b01f"}, labels
    xla_labels = _conv_labels_in_scanned_update("xla")
    if set(xla_labels) == {"b01f_01io->b01f"}:
        pytest.skip("this XLA canonicalizes loop-body conv gradients itself; "
                    "conv_gradient 'auto' could use 'xla' on the CPU too")
