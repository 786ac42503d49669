"""The automatic tracers (sweep.trace.auto): every array operation of real numpy and torch code is an event, views
alias their buffer, in-place and out= writes come from the operation, nothing escapes unseen, and a step run
twice is one template."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from sweep.methods.sgd import SGDUpdate, init_params
from sweep.trace.auto import NumpyTracer, TorchTracer, TracedArray
from sweep.trace.trace import NULL_TRACE, READ, WRITE, Trace
from sweep.variants.standard import Standard


def events(trace: Trace) -> list[tuple[str, str, int]]:
    return [("R" if op == READ else "W", name, size) for op, name, size in trace.events]


def reads_follow_writes(trace: Trace) -> bool:
    written: set[str] = set()
    for op, name, _ in trace.events:
        if op == WRITE:
            written.add(name)
        elif name not in written:
            return False
    return True


def test_numpy_operations_views_and_in_place_writes():
    tr = Trace()
    a0, b0 = np.arange(6.0).reshape(2, 3), np.ones(3)
    with NumpyTracer(tr) as t:
        a, b = t.wrap(a0, "a"), t.wrap(b0, "b")
        c = a + b  # broadcast: reads a (6) and b (3), writes c (6)
        v = c.T[1:]  # views: no event
        v *= 2.0  # in place on a view: reads and writes c's buffer, 4 elements
        s = c.sum(0)
        m = a @ b  # 2 x 3 @ 3: 6 multiply-adds
    assert isinstance(c, TracedArray) and isinstance(m, TracedArray)
    assert events(tr) == [
        ("W", "a", 6), ("W", "b", 3),
        ("R", "a", 6), ("R", "b", 3), ("W", "add#0", 6),
        ("R", "add#0", 4), ("W", "add#0", 4),
        ("R", "add#0", 6), ("W", "sum#2", 3),
        ("R", "a", 6), ("R", "b", 3), ("W", "matmul#3", 2),
    ]  # fmt: skip
    assert tr.compute_ops == {"add": 6 + 6, "mul": 4, "fma": 6}
    expected = a0 + b0
    expected[:, 1:] *= 2.0
    assert np.array_equal(t.unwrap(s), expected.sum(0)) and type(t.unwrap(s)) is np.ndarray


def test_numpy_nothing_escapes_unseen():
    """np.asarray stays traced, creation functions are writes, Python values are reads counted in escaped, and an
    array made before the tracer is written where it is first read."""
    tr = Trace()
    outside, x0 = np.full(4, 2.0), np.arange(4.0)
    with NumpyTracer(tr) as t:
        x = t.wrap(x0, "x")
        same = np.asarray(x)  # the same memory: stays traced, no event
        assert isinstance(same, TracedArray)
        z = np.zeros(4)  # a write of a new buffer
        y = same * outside + z
        assert t.escaped == 0
        total = float(y.sum())
        flag = bool(y[0] > 0)
        values = y.tolist()
        raw = y.tobytes()
        items = list(y)
        picked = y[2].item()
        copied = copy.copy(y)  # an ndarray method the tracer does not list: still a read and a write
    assert np.zeros is not None and not isinstance(np.zeros(2), TracedArray)  # restored on exit
    assert (total, flag, values[1], len(raw), items[3], picked) == (12.0, False, 2.0, 32, 6.0, 4.0)
    assert t.escaped == 1 + 1 + 4 + 4 + 4 + 1
    ev = events(tr)
    assert ("W", "zeros#0", 4) in ev
    assert ("W", "multiply#1.in1", 4) in ev  # the array made outside, written where first read
    assert ev.count(("R", "add#2", 4)) >= 4  # tolist, tobytes, iteration read all of y (and the copy)
    assert ev[-1][0] == "W" and isinstance(copied, TracedArray)
    assert reads_follow_writes(tr)


def test_numpy_gather_and_setitem():
    tr, x0, idx0 = Trace(), np.arange(5.0), np.array([0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 4])
    with NumpyTracer(tr) as t:
        x, idx = t.wrap(x0, "x"), t.wrap(idx0, "idx")
        g = x[idx]  # 11 elements gathered from a 5-element buffer: two whole reads and one of 1
        x[1:3] = g[:2]
    assert events(tr)[2:] == [
        ("R", "x", 5), ("R", "x", 5), ("R", "x", 1), ("R", "idx", 11), ("W", "getitem#0", 11),
        ("R", "getitem#0", 2), ("W", "x", 2),
    ]  # fmt: skip
    assert t.unwrap(x).tolist() == [0.0, 0.0, 0.0, 3.0, 4.0]


def sgd_step_numpy(steps: int = 1) -> tuple[Trace, NumpyTracer]:
    p, _ = init_params(20, 8, 1)
    rng = np.random.RandomState(0)
    x, y = np.sign(rng.randn(4, 20)), np.sign(rng.randn(4))
    tr = Trace()
    with NumpyTracer(tr) as t:
        q = {k: t.wrap(v * 1.0, k) for k, v in p.items()}
        for _ in range(steps):
            Standard().step(np, q, t.wrap(x, "x"), t.wrap(y, "y"), SGDUpdate(0.1, 0.01), NULL_TRACE)
            t.end_step()
    return tr, t


def sgd_step_torch() -> tuple[Trace, TorchTracer]:
    import array_api_compat.torch as xp

    p, _ = init_params(20, 8, 1)
    rng = np.random.RandomState(0)
    x, y = torch.as_tensor(np.sign(rng.randn(4, 20))), torch.as_tensor(np.sign(rng.randn(4)))
    q = {k: torch.as_tensor(v * 1.0) for k, v in p.items()}
    tr = Trace()
    with TorchTracer(tr, {**q, "x": x, "y": y}) as t:
        Standard().step(xp, q, x, y, SGDUpdate(0.1, 0.01), NULL_TRACE)
    return tr, t


def test_sgd_step_traced_on_numpy_and_torch_alike():
    """The MLP step run by its own code under each tracer: every weight read in the forward and backward and
    written by the update, the same arithmetic on both libraries, one escape (the margin test's bool)."""
    for tr, t in (sgd_step_numpy(), sgd_step_torch()):
        ev = events(tr)
        assert t.escaped == 1
        assert reads_follow_writes(tr)
        assert ev.count(("R", "W1", 160)) == 3  # the forward, the update's decay and its subtraction
        assert ev.count(("W", "W1", 160)) == 1 + 2  # put in memory, decayed, updated
        assert ("W", "b2", 1) == ev[-1]
        assert tr.compute_ops == {"fma": 1344, "add": 249, "max": 32, "mul": 240, "cmp": 44}


def test_repeated_steps_are_one_template():
    tr, _ = sgd_step_numpy(steps=3)
    templates, seq = tr.segments()
    assert len(seq) == 3 and seq[1] == seq[2]  # the first step also holds the weights' initial writes


def test_torch_autograd_optimizer_views_and_escapes():
    model = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.ReLU(), torch.nn.Linear(7, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
    x = torch.randn(3, 5)
    names = {**dict(model.named_parameters()), "x": x}
    tr = Trace()
    with TorchTracer(tr, names) as t:
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        before = t.escaped
        v = loss.item()
        listed = loss.detach().tolist()
        arr = np.asarray(loss.detach())
        w = model[0].weight.detach()
        w.t()[1:].sum()  # a view of a view: a read of the weight's storage
        buf = torch.empty(7)
        torch.add(model[0].bias.detach(), 1.0, out=buf)  # out=: written, not read
        buf.add_(1.0)  # in place: read and written
    assert (v, listed, float(arr)) == (v, v, v)
    assert t.escaped - before == 3
    ev = events(tr)
    for name, p in model.named_parameters():
        n = p.numel()
        assert ("W", name, n) == ev[list(names).index(name)]
        reads = [e for e in ev if e[:2] == ("R", name)]
        writes = [e for e in ev if e[:2] == ("W", name)]
        assert len(reads) >= 2 and len(writes) >= 2, name  # forward + optimizer reads, optimizer writes
    assert ("R", "0.weight", 28) in ev  # w.t()[1:] is 4 x 7 of the 7 x 5 weight's storage
    out_events = [e for e in ev if e[1].startswith("empty#")]
    assert [e[0] for e in out_events] == ["W", "R", "W"] and {e[2] for e in out_events} == {7}
    assert reads_follow_writes(tr)
    assert tr.compute_ops["fma"] >= 3 * 5 * 7 + 3 * 7  # the forward's two matmuls at least


def test_tracers_leave_nothing_patched():
    """numpy's functions and torch's methods are replaced only while a tracer is open, an exception included."""
    from sweep.trace.auto import numpy_tracer, torch_tracer

    with pytest.raises(ZeroDivisionError), NumpyTracer(Trace()), TorchTracer(Trace()):
        assert np.asarray is not numpy_tracer._ORIG["asarray"]
        assert torch.Tensor.tolist is not torch_tracer._ORIG["tolist"]
        raise ZeroDivisionError
    assert all(getattr(np, n) is f for n, f in numpy_tracer._ORIG.items())
    assert all(getattr(torch.Tensor, n) is f for n, f in torch_tracer._ORIG.items())
    assert not isinstance(np.asarray([1.0]) + 1.0, TracedArray)
