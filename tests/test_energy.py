"""The energy tracker: hand-computed answers on small traces (the model of docs/energy.md), the shared LRU
stack pass against a literal per-element stack, hierarchy validation, and real runs on every method."""

from __future__ import annotations

import random

import pytest
import yaml

from sweep import job
from sweep.energy import hierarchy as hier
from sweep.energy.hierarchy import Hierarchy, Level, load_hierarchy
from sweep.energy.model import energy_metrics, energy_report
from sweep.errors import ConfigError
from sweep.trace.stack import COLD, stack_runs
from sweep.trace.trace import OP_KINDS, READ, Trace
from tests.conftest import ROOT, compose, random_trace, run_sweep

EXAMPLE = "W a 2, W b 3, R a 2, R b 3, W c 1, R a 2, R c 1, R d 1"


def two_level(l1_bytes: int) -> Hierarchy:
    return Hierarchy("test", (Level("L1", l1_bytes, 1.0, 2.0), Level("DRAM", None, 100.0, 200.0)), {}, 4)


def test_worked_example():
    """docs/energy.md: L1 of 24 bytes serves the second `R a` at depth 6 exactly at its boundary."""
    m = energy_metrics(Trace.from_text(EXAMPLE), two_level(24))
    assert (m["L1_reads"], m["L1_writes"], m["DRAM_reads"], m["DRAM_writes"]) == (8, 0, 1, 6)
    assert m["energy_pj"] == m["energy_memory_pj"] == 1308.0
    m = energy_metrics(Trace.from_text(EXAMPLE), two_level(20))  # 5 floats: depth 6 goes to DRAM
    assert (m["L1_reads"], m["DRAM_reads"], m["DRAM_writes"], m["energy_pj"]) == (6, 3, 6, 1506.0)


def test_read_of_element_just_written_costs_first_level():
    m = energy_metrics(Trace.from_text("W a 1, R a 1"), two_level(24))
    assert (m["L1_pj"], m["L1_reads"]) == (1.0, 1)  # the read: depth 1, L1's read price
    assert m["DRAM_pj"] == 200.0  # the write is a first touch


def test_first_touch_costs_outermost_level():
    assert energy_metrics(Trace.from_text("R d 3"), two_level(1 << 20))["DRAM_pj"] == 300.0
    assert energy_metrics(Trace.from_text("W d 3"), two_level(1 << 20))["DRAM_pj"] == 600.0


def test_capacity_boundary():
    # after W a 4, re-reading a has depth 4 for every element: 16 bytes fit a 16-byte level, not a 15-byte one
    t = Trace.from_text("W a 4, R a 4")
    assert energy_metrics(t, two_level(16))["L1_reads"] == 4
    assert energy_metrics(t, two_level(15))["L1_reads"] == 0


def test_one_level_hierarchy_is_floats_times_price():
    t = Trace.from_text(EXAMPLE)
    h = Hierarchy("one", (Level("M", None, 3.0, 5.0),), {}, 4)
    assert energy_metrics(t, h)["energy_pj"] == 3.0 * 9 + 5.0 * 6


def literal_lru_depths(trace: Trace) -> list[tuple[int, int]]:
    """Per element access (event, depth or COLD), from a literal stack: a list, most recent last."""
    stack: list[tuple[str, int]] = []
    out = []
    for i, (_, name, size) in enumerate(trace):
        for j in range(size):
            el = (name, j)
            if el in stack:
                out.append((i, len(stack) - stack.index(el)))
                stack.remove(el)
            else:
                out.append((i, COLD))
            stack.append(el)
    return out


@pytest.mark.parametrize("seed", range(15))
def test_lru_stack_pass_is_the_literal_stack(seed):
    rng = random.Random(seed)
    t = random_trace(rng, rng.randint(0, 40), names="abcde", sizes=range(8))
    got = [(i, first + step * k) for i, first, step, count in stack_runs(t, reads_move=True) for k in range(count)]
    assert got == literal_lru_depths(t)


@pytest.fixture(scope="module")
def sgd_trace() -> Trace:
    """One traced SGD step (the published scope) at a small width, with its operation counts."""
    from sweep.backend import Backend
    from sweep.methods.base import Context

    cfg = compose("method.hidden=16", "method.max_epochs=2", "problem.n_train=64")
    trace = Trace()
    ctx = Context(
        problem=job.build(cfg.problem),
        data=job.build(cfg.problem).generate(),
        backend=Backend(),
        trace=trace,
        scope="published",
        variant=job.build(cfg.variant),
    )
    job.build(cfg.method).solve(ctx)
    return trace


def test_level_counts_add_up_to_trace_floats(sgd_trace):
    m = energy_metrics(sgd_trace, load_hierarchy("cpu"))
    names = [lv.name for lv in load_hierarchy("cpu").levels]
    read = sum(s for op, _, s in sgd_trace if op == READ)
    written = sum(s for op, _, s in sgd_trace if op != READ)
    assert sum(m[f"{n}_reads"] for n in names) == read
    assert sum(m[f"{n}_writes"] for n in names) == written
    assert m["energy_pj"] == pytest.approx(sum(m[f"{n}_pj"] for n in names) + m["energy_compute_pj"])
    table = {r["buffer"]: r["energy_pj"] for r in energy_report(sgd_trace, load_hierarchy("cpu")).table}
    assert sum(table.values()) == pytest.approx(m["energy_memory_pj"])


def test_doubling_every_price_doubles_energy(sgd_trace):
    cpu = load_hierarchy("cpu")
    double = load_hierarchy(
        "cpu",
        {lv.name: {"read_pj": 2 * lv.read_pj, "write_pj": 2 * lv.write_pj} for lv in cpu.levels},
        {k: 2 * v for k, v in cpu.ops_pj.items()},
    )
    t = Trace(list(sgd_trace.events))
    t.compute("fma", 1000)
    t.compute("cmp", 7)
    base = energy_metrics(t, cpu)
    assert base["energy_compute_pj"] > 0
    assert energy_metrics(t, double)["energy_pj"] == pytest.approx(2 * base["energy_pj"])


def test_compute_energy_is_counts_times_prices():
    t = Trace.from_text("W a 1")
    t.compute("fma", 10)
    t.compute("xor", 3)
    h = load_hierarchy("cpu")
    assert energy_metrics(t, h)["energy_compute_pj"] == pytest.approx(10 * h.ops_pj["fma"] + 3 * h.ops_pj["xor"])
    t.compute_ops["teleport"] = 1  # Trace.compute refuses it; a trace built by other means is caught here
    with pytest.raises(ValueError, match="teleport"):
        energy_metrics(t, h)


def test_hierarchies_price_every_level_and_operation():
    for name in hier.hierarchy_names():
        h = load_hierarchy(name)
        assert set(h.ops_pj) == set(OP_KINDS)
        assert h.levels[-1].capacity_bytes is None
    assert load_hierarchy("gpu").ops_pj == load_hierarchy("cpu").ops_pj  # gpu.yaml takes cpu's by name


@pytest.mark.parametrize(
    "overrides, field",
    [
        (["tracker.hierarchy=nope"], "tracker.hierarchy='nope'"),
        (["+tracker.levels.L1.capacity_bytes=-4"], "tracker.levels.L1.capacity_bytes=-4"),
        (["+tracker.levels.L2.capacity_bytes=1024"], "tracker.levels.L2.capacity_bytes=1024"),
        (["+tracker.levels.L1.read_pj=null"], "tracker.levels.L1.read_pj is missing"),
        (["+tracker.levels.L9.read_pj=1"], "tracker.levels.L9"),
        (["+tracker.levels.L1=5"], "tracker.levels.L1 is not allowed"),
        (["+tracker.ops_pj.fma=-1"], "tracker.ops_pj.fma=-1"),
        (["+tracker.ops_pj.teleport=1"], "tracker.ops_pj.teleport"),
        (["tracker.bytes_per_float=0"], "tracker.bytes_per_float=0"),
    ],
)
def test_bad_hierarchy_names_the_field(overrides, field):
    with pytest.raises(ConfigError) as e:
        job.run(compose("tracker=energy", *overrides))
    assert field in str(e.value)


def test_hierarchy_file_without_a_price_or_an_operation(tmp_path, monkeypatch):
    """A user's file is checked like an override: a level without a price, an unpriced operation kind."""
    cpu = yaml.safe_load((ROOT / "conf" / "energy" / "cpu.yaml").read_text())
    no_price = {**cpu, "levels": {**cpu["levels"], "L2": {"capacity_bytes": 262144, "read_pj": 26.3}}}
    no_op = {**cpu, "ops_pj": {k: v for k, v in cpu["ops_pj"].items() if k != "xor"}}
    (tmp_path / "no_price.yaml").write_text(yaml.safe_dump(no_price, sort_keys=False))
    (tmp_path / "no_op.yaml").write_text(yaml.safe_dump(no_op, sort_keys=False))
    (tmp_path / "broken.yaml").write_text("levels: [unclosed\n")
    monkeypatch.setattr(hier, "HIERARCHY_DIR", tmp_path)
    hier._file.cache_clear()
    try:
        with pytest.raises(ConfigError, match="tracker.levels.L2.write_pj is missing"):
            load_hierarchy("no_price")
        with pytest.raises(ConfigError, match="tracker.ops_pj.xor is missing"):
            load_hierarchy("no_op")
        with pytest.raises(ConfigError, match="broken.yaml is not valid YAML"):
            load_hierarchy("broken")
    finally:
        hier._file.cache_clear()


def test_bad_hierarchy_exits_2_before_any_run(store, tmp_path):
    p = run_sweep("tracker=energy", "tracker.hierarchy=nope", cwd=tmp_path)
    assert p.returncode == 2
    assert "tracker.hierarchy='nope' is not allowed: expected one of cpu, gpu" in p.stderr


@pytest.mark.parametrize("method", ["sgd", "gf2", "km", "fourier", "smt"])
def test_energy_on_every_method(method):
    r = job.run(
        compose(
            "tracker=energy",
            f"method={method}",
            "problem.n_train=200",
            "method.max_epochs=20" if method == "sgd" else "problem.n_test=100",
        )
    )
    m = r.metrics
    for key in (
        "energy_pj",
        "energy_memory_pj",
        "energy_compute_pj",
        "ard",
        "dmc",
        "dmd",
        "DRAM_pj",
        "cache_miss_floats",
    ):
        assert key in m, key
    assert m["energy_memory_pj"] > 0 and m["energy_pj"] >= m["energy_memory_pj"]


def test_all_steps_per_epoch_energy_adds_up_to_the_solve():
    r = job.run(
        compose(
            "tracker=energy",
            "tracker.scope=all_steps",
            "tracker.hierarchy=gpu",
            "method.hidden=16",
            "problem.n_train=64",
            "method.max_epochs=3",
            "method.target_accuracy=1.0",
        )
    )
    curve = r.curves["energy_pj_per_epoch"]
    assert len(curve) == 3 and "HBM_pj" in r.metrics
    assert sum(curve) == pytest.approx(r.metrics["energy_pj"])  # the stack carries over from epoch to epoch
    assert "ard_per_epoch" in r.curves


def test_numpy_and_torch_give_the_same_energy():
    runs = [
        job.run(
            compose(
                "tracker=energy",
                "tracker.scope=init_sample0",
                f"device={d}",
                "method.hidden=16",
                "problem.n_train=64",
                "method.max_epochs=1",
            )
        ).metrics
        for d in ("cpu", "torch_cpu")
    ]
    for key in ("energy_pj", "energy_compute_pj", "dmd", "ard"):
        assert runs[0][key] == runs[1][key], key
