"""Every scheme primitive against plaintext, parametrised over all registered schemes."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import opened, run_protocol

from mpcnet.schemes import registry
from mpcnet.schemes.base import Scheme, Shared

EDGE = np.array([0, 1, -1, 2**62, -(2**62), 2**63 - 1, -(2**63), 12345, -98765], dtype=np.int64)


def _values(rng: np.random.Generator, n: int) -> np.ndarray:
    return np.concatenate([EDGE, rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64)])


def test_share_reconstruct_roundtrip(scheme: str) -> None:
    info = registry.get(scheme)
    x = _values(np.random.default_rng(1), 50).view(np.uint64)
    shares = info.share(x)
    assert len(shares) == info.n_parties
    np.testing.assert_array_equal(info.reconstruct(dict(enumerate(shares))), x)
    # no single party's share equals the secret
    assert all(not np.array_equal(sh.reshape(-1, x.size)[0], x) for sh in shares)


def test_reconstruct_detects_inconsistent_copies(scheme: str) -> None:
    from mpcnet.errors import CheatingDetected
    info = registry.get(scheme)
    shares = info.share(np.arange(10, dtype=np.uint64))
    shares[1] = shares[1].copy()
    shares[1].reshape(-1)[0] += np.uint64(1)
    with pytest.raises(CheatingDetected):
        info.reconstruct(dict(enumerate(shares)))


def test_linear_and_products(scheme: str) -> None:
    rng = np.random.default_rng(2)
    x, y = _values(rng, 40), _values(rng, 40)[::-1].copy()
    c = rng.integers(-1000, 1000, x.size)

    async def body(s, x, y):  # type: ignore[no-untyped-def]
        prod = await s.mul(x, y)
        lin = s.add_public(s.mul_public(s.sub(s.add(x, y), s.neg(y)), c), 7)
        return await s.open(prod), await s.open(lin), await s.open(s.public(c.view(np.uint64)))

    prod, lin, pub = opened(run_protocol(scheme, {"x": x, "y": y}, body))
    xu, yu, cu = x.view(np.uint64), y.view(np.uint64), c.view(np.uint64)
    np.testing.assert_array_equal(prod, xu * yu)
    np.testing.assert_array_equal(lin, (xu + yu + yu) * cu + np.uint64(7))
    np.testing.assert_array_equal(pub, cu)


def test_matmul(scheme: str) -> None:
    rng = np.random.default_rng(3)
    a = rng.integers(-(2**40), 2**40, (7, 5))
    b = rng.integers(-(2**40), 2**40, (5, 3))

    async def body(s: Scheme, a: Shared, b: Shared) -> tuple[np.ndarray, ...]:
        return await s.open(await s.matmul(a, b))

    result = opened(run_protocol(scheme, {"a": a, "b": b}, body))
    np.testing.assert_array_equal(result, a.view(np.uint64) @ b.view(np.uint64))


def test_binary_and_xor_and_components(scheme: str) -> None:
    rng = np.random.default_rng(4)
    x, y = _values(rng, 30), _values(rng, 30)

    async def body(s, x, y):  # type: ignore[no-untyped-def]
        # x and y are arithmetic sharings; their components give binary sharings that sum to x
        xs, ys = s.arith_components(x), s.arith_components(y)
        anded = await s.and_(xs[0], ys[0])
        opened_x = [await s.open_binary(c) for c in xs]
        opened_y0 = await s.open_binary(ys[0])
        bits = [await s.open(c) for c in await s.bit_components(s.xor_public(xs[0], 5))]
        return opened_x, opened_y0, await s.open_binary(anded), bits

    outs = run_protocol(scheme, {"x": x, "y": y}, body)
    comps, y0, anded, bits = outs[0]
    total = np.zeros(x.size, dtype=np.uint64)
    for c in comps:
        total += c
    np.testing.assert_array_equal(total, x.view(np.uint64))
    np.testing.assert_array_equal(anded, comps[0] & y0)
    xor_bits = np.zeros(x.size, dtype=np.uint64)
    for b in bits:
        assert set(np.unique(b)) <= {0, 1}
        xor_bits ^= b
    np.testing.assert_array_equal(xor_bits, (comps[0] ^ np.uint64(5)) & np.uint64(1))


def test_random_is_shared_and_fresh(scheme: str) -> None:
    async def body(s):  # type: ignore[no-untyped-def]
        return await s.open(await s.random((1000,))), await s.open(await s.random((1000,)))

    r1, r2 = opened(run_protocol(scheme, {}, body))
    assert not np.array_equal(r1, r2)
    assert len(np.unique(r1)) > 990


def test_secret_refuses_truth_value_and_implicit_mixing(scheme: str) -> None:
    from mpcnet.schemes.base import Shared
    secret = Shared(np.zeros((2, 3), dtype=np.uint64), 1)
    with pytest.raises(TypeError, match="truth value"):
        bool(secret)
    with pytest.raises(TypeError, match="cannot be mixed"):
        np.add(secret, 1)


@pytest.mark.parametrize("lead", [1, 2])
def test_rows_gathered_by_an_index_array_are_those_of_the_advanced_index(lead: int) -> None:
    """``Shared[index]`` with an integer array (np.take along the first logical axis) gives
    the rows the advanced index gives: signed and unsigned, negative, repeated, 2-D and 0-d
    indices, over logical shapes (n,) and (n, c); a bool mask still selects."""
    from mpcnet.schemes.base import Shared
    rng = np.random.default_rng(lead)
    for shape in [(7,), (7, 3)]:
        data = rng.integers(0, 2**63, (2,) * lead + shape, dtype=np.uint64)
        x = Shared(data, lead)
        at = (slice(None),) * lead
        for index in [np.array([3, 0, 6, 3]), np.array([5, 1], dtype=np.uint64),
                      np.array([-1, -7], dtype=np.int32), np.array([[1, 2], [6, 0]]),
                      np.array(4), np.array([], dtype=np.int64)]:
            np.testing.assert_array_equal(x[index].data, data[at + (index,)])
        mask = np.arange(7) % 2 == 0
        np.testing.assert_array_equal(x[mask].data, data[at + (mask,)])


def test_a_shuffler_moves_every_block_of_a_table_by_the_same_permutation(scheme: str) -> None:
    """Blocks of columns applied one after the other to one ``shuffler``, with other work
    drawing on the same keys between them, keep their rows together (column 1 is always 3
    times column 0, the other block 7 times it plus 1), in an order that is not the input's
    nor another shuffle's; a block of other rows is refused."""
    n = 40
    index = np.arange(n)

    async def body(s: Scheme, a: Shared, b: Shared) -> tuple[np.ndarray, ...]:
        mixing = s.shuffler(n)
        first = await mixing.apply(a)
        other = await s.shuffle(b)  # another shuffle between the blocks
        second = await mixing.apply(b)
        with pytest.raises(ValueError, match="40 rows"):
            await mixing.apply(a[:10])
        return (await s.open(first), await s.open(second), await s.open(other))

    first, second, other = opened(run_protocol(
        scheme, {"a": np.stack([index, 3 * index], axis=1), "b": 7 * index + 1}, body))
    moved = first[:, 0].astype(np.int64)
    assert sorted(moved) == list(range(n)) and not np.array_equal(moved, index)
    np.testing.assert_array_equal(first[:, 1], 3 * first[:, 0])
    np.testing.assert_array_equal(second, 7 * first[:, 0] + 1)
    assert not np.array_equal(other, second)  # the other shuffle's own permutation


@pytest.mark.parametrize("scheme", ["passive3", "active3", "active4"])
def test_matmul_of_a_transposed_factor(scheme: str) -> None:
    """X^T Y (the training's gradient [X~ 1]^T (P - Y), count.py's flags^T labels): the
    transposed view's product is F-ordered (ring.matmul's einsum keeps the layout), which
    rep3's in-place zero terms once refused (an adversarial review's find)."""
    rng = np.random.default_rng(3)
    a = rng.integers(-(2**40), 2**40, (7, 5))
    b = rng.integers(-(2**40), 2**40, (7, 3))

    async def body(s, a, b):  # type: ignore[no-untyped-def]
        return await s.open(await s.matmul(a.T, b))

    result = opened(run_protocol(scheme, {"a": a, "b": b}, body))
    np.testing.assert_array_equal(result, a.view(np.uint64).T @ b.view(np.uint64))



@pytest.mark.parametrize("scheme", ["passive3", "active3", "active4"])
def test_products_of_views_scalars_and_empty_operands(scheme: str) -> None:
    """The products as rewritten for less CPU (rep3's zero terms added in place, rep4's
    folded diagonals, the split counts) on operands of every layout: a transposed view, a broadcast
    row, a 1 x 1 result, an empty batch, a factor held for many
    products (``hold_factor``) and the bit counts of ``mpcnet.ops.count`` over more than one
    block of ``rep4._dot``'s rows."""
    from mpcnet.ops.convert import a2b
    from mpcnet.ops.count import bit_counts

    rng = np.random.default_rng(11)
    a = rng.integers(-(2**40), 2**40, (2100, 3))
    b = rng.integers(-(2**40), 2**40, (2100, 3))
    lab = np.zeros((2100, 2), dtype=np.int64)
    lab[np.arange(2100), rng.integers(0, 2, 2100)] = 1

    async def body(s, a, b, lab):  # type: ignore[no-untyped-def]
        left = a.T  # the very object held
        s.hold_factor(left)
        held = await s.matmul(left, b)
        s.drop_factors()
        products = [held, await s.mul(a.T, b[:1].T), await s.matmul(a[:, :1].T, b[:, 1:2]),
                    await s.mul(a[:0], b[:0]), await s.matmul(a[:0].T, b[:0])]
        flags, classes = await bit_counts(s, await a2b(s, a), lab)
        return tuple([await s.open(x) for x in (*products, flags, classes)])

    got = opened(run_protocol(scheme, {"a": a, "b": b, "lab": lab}, body))
    au, bu = a.view(np.uint64), b.view(np.uint64)
    low = au & np.uint64(1)
    want = [au.T @ bu, au.T * bu[:1].T, au[:, :1].T @ bu[:, 1:2], au[:0] * bu[:0],
            au[:0].T @ bu[:0], low.sum(0), low.T @ lab.view(np.uint64)]
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)
