"""Batching (`hydra.launcher.batch`) with real processes and a real store: a batched sweep records the same runs as
the same sweep unbatched (accuracy, epochs, secret), each tagged with its batch; a run that fails alone fails alone;
SIGTERM mid-batch records the batch's runs KILLED and a re-run finishes them; bad values are refused."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import pytest

from hydra_plugins.sweep_launcher._batches import batched, group, leading, spread, take, units
from hydra_plugins.sweep_launcher._core import Reply, dump_reply, load_reply, split_replies
from sweep.record.tags import BATCH_ID_TAG, BATCH_SIZE_TAG
from tests import forked_sweep
from tests.faulty import DIVERGENT_LR
from tests.test_launcher import runs, store, sweep  # noqa: F401 - the module's store fixture

LOCAL = ["hydra/launcher=local", "hydra.launcher.n_workers=2", "tracker=none"]
# small SGD jobs: a few epochs of a narrow net (what is compared is the same either way)
SMALL_SGD = ["problem.n_bits=12", "method.hidden=32", "method.max_epochs=8"]


@dataclass
class _Job:
    idx: int
    key: object
    batch: object = None


def test_grouping_keeps_keys_apart_fills_batches_and_sends_each_as_one():
    jobs = [_Job(i, k) for i, k in enumerate(["a", "b", None, "a", "a", "b", "a", "a"])]
    groups = [[j.idx for j in g] for g in group(jobs, lambda j: j.key, 3)]
    assert groups == [[2], [0, 3, 4], [1, 5], [6, 7]]  # None alone; a full batch as soon as it fills; the rest
    assert [[j.idx for j in g] for g in group(jobs, lambda j: j.key, 1)] == [[i] for i in range(8)]
    queue = deque(batched(jobs, lambda j: j.key, 3))
    sent = []
    while queue:
        sent.append([j.idx for j in take(queue)])
    assert sent == groups
    assert [j.idx for j in leading([jobs[0], jobs[3], jobs[4], jobs[2]])] == [0, 3, 4]
    assert units([jobs[0], jobs[3], jobs[4], jobs[2]]) == 2


def test_batches_spread_over_the_workers_in_even_sizes():
    # one key's 3 jobs at 2 workers: a batch of 2 and one alone (a batch of 3 would leave a worker idle)
    assert spread(["a"] * 3, 64, 2) == {"a": 2}
    jobs = [_Job(i, "a") for i in range(3)]
    assert [[j.idx for j in g] for g in group(jobs, lambda j: j.key, spread(["a"] * 3, 64, 2))] == [[0, 1], [2]]
    assert [j.batch is None for j in batched(jobs, lambda j: j.key, 64, workers=2)] == [False, False, True]
    # enough jobs for every worker: only `batch` caps, and a key's jobs split evenly (50 + 50, not 64 + 36)
    assert spread(["a"] * 100 + ["b"] * 3, 64, 2) == {"a": 50, "b": 3}
    assert spread(["a"] * 16, 16, 2) == {"a": 8} and spread(["a"] * 16, 16, 1) == {"a": 16}
    assert spread(["a"] * 10_000, 256, 2) == {"a": 250}
    # jobs alone count as tasks: 6 of them and 4 batchable jobs at 2 workers leave the 4 in one batch
    assert spread([None] * 6 + ["a"] * 4, 64, 2) == {"a": 4}


def by_config(store: str, exp: str) -> dict[tuple, object]:
    """The experiment's child runs by the params that tell its jobs apart."""
    _, children = runs(store, exp)
    keys = ("method.name", "problem.seed", "method.lr", "method.wd", "device.name")
    return {tuple(c.data.params.get(k) for k in keys): c for c in children}


def batched_and_alone(
    store: str, tmp_path: Path, name: str, batch: int, *args: str, workers: int = 2
) -> tuple[dict, dict]:
    """The same sweep run batched and then alone (batch=1), each into its own experiment: (batched, alone) runs."""
    out = []
    for b in (batch, 1):
        exp = f"{name}_b{b}"
        p = sweep(
            store,
            tmp_path,
            *LOCAL,
            f"hydra.launcher.n_workers={workers}",
            *args,
            f"hydra.launcher.batch={b}",
            f"mlflow.experiment={exp}",
        )
        assert p.returncode == 0, p.stderr
        out.append(by_config(store, exp))
    return out[0], out[1]


def assert_same_runs(batched: dict, alone: dict, batch: int, sizes: list[int] | None = None) -> None:
    """Each batched run equals its run alone; the batches have `sizes` (default: all of `batch` runs)."""
    assert batched.keys() == alone.keys() and len(batched) > 1
    sizes = sizes or [batch] * (len(batched) // batch)
    for key, b in batched.items():
        a = alone[key]
        assert b.info.status == a.info.status == "FINISHED", key
        for m in ("accuracy", "train_accuracy", "epochs", "secret_correct"):
            if m in a.data.metrics:
                assert b.data.metrics[m] == a.data.metrics[m], (key, m)
        assert b.data.tags["secret"] == a.data.tags["secret"]
        assert b.data.tags.get("secret_found") == a.data.tags.get("secret_found")
        assert b.data.params == a.data.params  # the same job: the same params
        # tagged with its batch; its wall-clock is its share of the batch's solve
        assert BATCH_ID_TAG not in a.data.tags
        if BATCH_ID_TAG in b.data.tags:
            size = int(b.data.tags[BATCH_SIZE_TAG])
            assert b.data.metrics["wall_clock_s"] == pytest.approx(b.data.metrics["batch_wall_s"] / size)
    ids: dict[str, int] = {}
    for b in batched.values():
        if BATCH_ID_TAG in b.data.tags:
            ids[b.data.tags[BATCH_ID_TAG]] = int(b.data.tags[BATCH_SIZE_TAG])
    alone_in_batched = sum(BATCH_ID_TAG not in b.data.tags for b in batched.values())
    assert sorted([*ids.values(), *[1] * alone_in_batched]) == sorted(sizes)


def test_sixteen_sgd_seeds_batched_equal_the_same_runs_alone(store, tmp_path):
    batched, alone = batched_and_alone(
        store, tmp_path, "seeds16", 16, "method=sgd", "problem.seed=range(42,58)", "method.max_epochs=6"
    )
    assert len(batched) == 16
    assert_same_runs(batched, alone, 16, sizes=[8, 8])  # two workers: two batches of 8 (_batches.spread)


def solved_by(store, tmp_path, method: str, seeds: int, batch: int, experiment: str) -> dict[int, tuple[str, float]]:
    """Each seed's batch and the process that solved it, from a gf2 sweep on two workers whose method logs its pid
    (tests/worker_pid.py)."""
    p = sweep(
        store,
        tmp_path,
        *LOCAL,
        "method=gf2",
        f"method._target_=tests.worker_pid.{method}",
        f"problem.seed=range(0,{seeds})",
        f"hydra.launcher.batch={batch}",
        f"mlflow.experiment={experiment}",
    )
    assert p.returncode == 0, p.stderr
    _, children = runs(store, experiment)
    return {
        int(c.data.params["problem.seed"]): (c.data.tags[BATCH_ID_TAG], c.data.metrics["worker_pid"]) for c in children
    }


def test_as_many_batches_as_workers_run_one_on_each_worker(store, tmp_path):
    """Two batches on two workers: each worker gets one (filled breadth first), not both on the first worker while
    the second idles (each worker holds two tasks, so a depth-first fill queued both on one)."""
    pids: dict[str, set] = {}
    for batch, pid in solved_by(store, tmp_path, "PidGF2", 8, 4, "two_batches").values():
        pids.setdefault(batch, set()).add(pid)
    assert len(pids) == 2 and all(len(p) == 1 for p in pids.values())  # two batches, each solved in one process
    assert len(set.union(*pids.values())) == 2, pids  # by two workers


def test_no_batch_waits_behind_a_batch_while_another_worker_is_free(store, tmp_path):
    """Three batches on two workers, the first one long: the third goes to the worker that finishes first, not
    queued behind the long one (a worker holds a second task behind a lone job only)."""
    pid = {seed: pid for seed, (_, pid) in solved_by(store, tmp_path, "SlowSeed0GF2", 6, 2, "three_batches").items()}
    assert len(pid) == 6 and pid[0] == pid[1] and pid[2] == pid[3] and pid[4] == pid[5]  # batches of 2, in order
    assert pid[4] == pid[2] != pid[0], pid  # the third batch ran where the second did, while the first ran on


def test_one_keys_runs_spread_over_two_workers_equal_the_same_runs_alone(store, tmp_path):
    """3 seeds at batch=64 on two workers: a batch of 2 on one worker, the third run alone on the other (one
    batch of 3 would leave a worker idle); every run equals its run alone."""
    batched, alone = batched_and_alone(store, tmp_path, "spread3", 64, "method=sgd", "problem.seed=1,2,3", *SMALL_SGD)
    assert_same_runs(batched, alone, 64, sizes=[2, 1])


def test_sgd_sign_sgd_and_curriculum_each_batch_their_own_seeds(store, tmp_path):
    batched, alone = batched_and_alone(
        store, tmp_path, "methods", 3, "method=sgd,sign_sgd,curriculum", "problem.seed=1,2,3", *SMALL_SGD
    )
    assert len(batched) == 9
    assert_same_runs(batched, alone, 3)


def test_a_mixed_lr_wd_grid_on_torch_cpu_is_one_batch(store, tmp_path):
    pytest.importorskip("torch")
    batched, alone = batched_and_alone(
        store,
        tmp_path,
        "grid_torch",
        4,
        "device=torch_cpu",
        "device.threads=1",  # two workers on two cores: torch's pool of one thread each
        "method=sgd",
        "method.lr=0.1,0.05",
        "method.wd=0.0,0.01",
        "problem.seed=1",
        *SMALL_SGD,
        "method.max_epochs=4",
        workers=1,
    )
    assert_same_runs(batched, alone, 4)


def test_gf2_seeds_batched(store, tmp_path):
    batched, alone = batched_and_alone(store, tmp_path, "gf2", 6, "method=gf2", "problem.seed=range(0,12)")
    assert_same_runs(batched, alone, 6)


def test_a_divergent_run_fails_alone_and_the_rest_of_its_batch_finishes(store, tmp_path):
    p = sweep(
        store,
        tmp_path,
        *LOCAL,
        "hydra.launcher.n_workers=1",  # one batch of four (two workers would split it)
        "method=sgd",
        "method._target_=tests.faulty.FaultySGD",
        f"method.lr=0.1,{DIVERGENT_LR:g}",
        "problem.seed=1,2",
        *SMALL_SGD,
        "hydra.launcher.batch=4",
        "mlflow.experiment=divergent",
    )
    assert p.returncode == 1, p.stderr
    assert "sweep: 2 job(s) finished, 2 failed" in p.stderr
    _, children = runs(store, "divergent")
    status = {(c.data.params["method.lr"], c.data.params["problem.seed"]): c.info.status for c in children}
    assert status == {
        ("0.1", "1"): "FINISHED",
        ("0.1", "2"): "FINISHED",
        (f"{DIVERGENT_LR}", "1"): "FAILED",
        (f"{DIVERGENT_LR}", "2"): "FAILED",
    }, status
    assert "FloatingPointError" in p.stderr
    # the two that finished were solved in one batch of four
    assert {c.data.tags.get(BATCH_SIZE_TAG) for c in children if c.info.status == "FINISHED"} == {"4"}


def test_sigterm_mid_batch_records_its_runs_killed_and_a_rerun_finishes_them(store, tmp_path):
    # two batches of two on one worker: the short one finishes, the long one (never converging) is cut short
    args = [
        "hydra/launcher=local",
        "hydra.launcher.n_workers=1",
        "tracker=none",
        "method=sgd",
        "method.lr=1e-6",
        "problem.seed=1,2",
        "hydra.launcher.batch=2",
        "mlflow.experiment=term_batch",
    ]
    env = forked_sweep.with_project({**os.environ, "MLFLOW_TRACKING_URI": store})
    proc = forked_sweep.popen(["-m", *args, "method.max_epochs=1,100000"], tmp_path, env, session=True)
    try:
        deadline, finished = time.monotonic() + 120, 0
        while finished < 2 and time.monotonic() < deadline:
            line = forked_sweep.readline(proc, max(0.0, deadline - time.monotonic()))
            if not line and proc.poll() is not None:
                break
            finished += line.startswith("[FINISHED]")
        assert finished == 2, proc.communicate()[1] if proc.poll() is not None else "no 2 finished jobs in time"
        time.sleep(1.0)  # the long batch is running now
        os.kill(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 143, err
    assert "sweep: interrupted by SIGTERM: 2 running job(s) recorded KILLED, 0 not started" in err
    _, children = runs(store, "term_batch")
    assert sorted((c.data.params["method.max_epochs"], c.info.status) for c in children) == [
        ("1", "FINISHED"),
        ("1", "FINISHED"),
        ("100000", "KILLED"),
        ("100000", "KILLED"),
    ]
    # the re-run skips the finished batch and runs the killed one again, batched (short now: max_epochs=2)
    p = sweep(store, tmp_path, *args, "method.max_epochs=1,2")
    assert p.returncode == 0 and "skipping 2 job(s)" in p.stdout, p.stderr
    _, children = runs(store, "term_batch")
    rerun = [c for c in children if c.data.params["method.max_epochs"] == "2"]
    assert [c.info.status for c in rerun] == ["FINISHED", "FINISHED"]
    assert {c.data.tags[BATCH_SIZE_TAG] for c in rerun} == {"2"}


@pytest.mark.parametrize("value", ["0", "-3"])
def test_a_bad_batch_size_is_refused_in_one_line(store, tmp_path, value):
    p = sweep(store, tmp_path, *LOCAL, "method=gf2", "problem.seed=1,2", f"hydra.launcher.batch={value}")
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().splitlines()[-1] == (
        f"sweep: hydra.launcher.batch={value} is not allowed: expected an integer >= 1 "
        "(the most jobs solved together in one task; 1: each job alone)"
    )
    assert "Traceback" not in p.stderr


def test_the_size_guard_counts_a_batch_as_its_runs(store, tmp_path):
    """A job that fits alone under a 2.5 GB address-space limit does not fit 64 times: refused before any job,
    naming the batch."""
    from tests.test_faults import _limited, one_line

    args = ["-m", *LOCAL, "method=sgd", "problem.n_train=200000", "problem.seed=range(0,64)", "mlflow.experiment=big"]
    env = {**os.environ, "MLFLOW_TRACKING_URI": store}
    cmd = [sys.executable, "-m", "sweep", *args]
    limit = _limited(2_500_000_000)
    p = subprocess.run(
        [*cmd, "hydra.launcher.batch=64"], cwd=tmp_path, env=env, capture_output=True, text=True, preexec_fn=limit
    )
    assert p.returncode == 2, p.stderr
    line = one_line(p.stderr)
    assert "a batch of 64 runs of the job needs about" in line and line.endswith("hydra.launcher.batch=64"), line
    _, children = runs(store, "big")
    assert not children


def test_batches_larger_than_the_pipe_finish(store, tmp_path):
    """Two batches of 64 gf2 jobs on one worker: a batch's message (~1 MB) and its replies each exceed what a
    pipe holds, so the launcher sending the second batch while the worker sends the first's replies must not
    stall (it did, before the worker read its messages on a thread)."""
    args = ["hydra/launcher=local", "hydra.launcher.n_workers=1", "tracker=none", "method=gf2"]
    p = sweep(
        store,
        tmp_path,
        *args,
        "problem.seed=range(0,128)",
        "hydra.launcher.batch=64",
        "mlflow.experiment=big_batches",
        timeout=150,
    )
    assert p.returncode == 0, p.stderr
    _, children = runs(store, "big_batches")
    assert len(children) == 128 and all(c.info.status == "FINISHED" for c in children)
    assert {c.data.tags[BATCH_SIZE_TAG] for c in children} == {"64"}


def test_a_batch_placed_on_modal_runs_as_one_call_offline(store, tmp_path):
    """hydra/launcher=modal offline: each batch goes through the Modal Function's .local() as one call, and each
    of its jobs comes back as its own run."""
    p = sweep(
        store,
        tmp_path,
        "hydra/launcher=modal",
        "hydra.launcher.modal.offline=true",
        "hydra.launcher.n_workers=1",
        "tracker=none",
        "method=gf2",
        "problem.seed=range(0,6)",
        "hydra.launcher.batch=3",
        "mlflow.experiment=modal_batches",
    )
    assert p.returncode == 0, p.stderr
    _, children = runs(store, "modal_batches")
    assert len(children) == 6 and all(c.info.status == "FINISHED" for c in children)
    assert {c.data.tags["sweep.route"] for c in children} == {"modal"}
    assert {c.data.tags[BATCH_SIZE_TAG] for c in children} == {"3"}
    assert len({c.data.tags[BATCH_ID_TAG] for c in children}) == 2


def test_an_answer_for_a_whole_batch_is_each_of_its_jobs():
    """Modal's failure (a lost container) or a payload that cannot be unpacked answers a batch as a whole: each of
    its jobs gets it under its own index, so the launcher waits on none of them."""
    whole = dump_reply(Reply(idx=3, job_return=None, error="Modal: container lost\n", reason="container lost"))
    replies = [load_reply(d, i) for d, i in zip(split_replies(whole, [3, 4, 5]), [3, 4, 5])]
    assert [(r.idx, r.reason) for r in replies] == [(3, "container lost"), (4, "container lost"), (5, "container lost")]


@pytest.mark.parametrize("limit", [[], ["hydra.launcher.time_limit_s=60"]], ids=["silent", "timed"])
def test_a_worker_killed_mid_batch_fails_only_the_job_that_killed_it(store, tmp_path, limit):
    # seed 3's solve kills its worker inside a batch of 4, 3, 5 (seed 4 first): the death was put on the batch's
    # first job, seed 4, FAILED though it finishes alone. Unless the app says which job it is in (under a time
    # limit, `timer.begin`), the batch's jobs run again one at a time, so seed 3 alone is FAILED either way.
    p = sweep(
        store, tmp_path, *LOCAL, "hydra.launcher.n_workers=1", "method=gf2",
        "method._target_=tests.worker_pid.DiesSeed3GF2", "problem.seed=4,3,5", "hydra.launcher.batch=8",
        f"mlflow.experiment=dies-{len(limit)}", *limit,
    )  # fmt: skip
    assert p.returncode == 1, p.stderr
    _, children = runs(store, f"dies-{len(limit)}")
    status = {c.data.params["problem.seed"]: c.info.status for c in children}
    assert status == {"4": "FINISHED", "3": "FAILED", "5": "FINISHED"}, p.stderr
    assert re.search(r"\[FAILED\] .*seed=3.*: worker process \d+ died \(exit code -9\) while running the job", p.stderr)
    again = "its jobs run again one at a time"
    assert (again in p.stderr) == (not limit), p.stderr
    assert all(c.data.metrics["accuracy"] == 1.0 for c in children if c.info.status == "FINISHED")
