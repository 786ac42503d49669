"""problem=chars and its language models (bigram, mlp_lm, gpt) on tiny configs: the corpus loader (a text file, a
WikiText-style raw directory made here, the shipped corpus), one-line refusals, determinism, the gpt beating the
bigram on held-out text, and the traced gpt step's reads and writes of every parameter."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

from sweep import job
from sweep.config.check import check_job
from sweep.errors import ConfigError
from sweep.problems.chars import Chars
from sweep.trace.trace import READ, WRITE, Trace
from tests.conftest import compose, run_sweep

# a few steps of a small model on a short context: seconds on one thread
TINY = {
    "bigram": (),
    "mlp_lm": ("method.max_steps=30", "method.eval_interval=10", "method.hidden=32", "method.context=4"),
    "gpt": ("method.max_steps=30", "method.eval_interval=10", "method.n_embd=16", "method.n_layer=1"),
}
DEVICE = ("device=torch_cpu", "device.dtype=float32", "device.threads=1")
SMALL_VAL = ("problem.block_size=16", "problem.val_chars=2048")


def words_file(tmp_path, n: int = 6000, seed: int = 0):
    """A text the bigram cannot predict and a context of 3 can: words `acx` and `bcy` in random order, so the
    character after `c` is fixed by the one two before it (bigram 2/3 of targets right at best, context 5/6)."""
    rng = np.random.RandomState(seed)
    path = tmp_path / "words.txt"
    path.write_text("".join(rng.choice(["acx", "bcy"], size=n)))
    return path


def test_a_text_file_is_split_and_its_vocabulary_is_the_training_texts(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("abcabcabcd" * 10 + "abcdabcdaé")  # é only in the last tenth: the validation text
    c = Chars(path=str(path), block_size=4, val_fraction=0.1, val_chars=0).generate()
    assert c.vocab == "abcd" and len(c.train) == 99 and len(c.val) == 11
    assert c.unknown == 1 and c.vocab_size == 5  # é is <unk>, an id no model predicts right
    x, y = c.val_blocks()
    assert x.shape == y.shape == (2, 4) and (x[:, 1:] == y[:, :-1]).all()  # targets are the next characters
    assert "".join(c.vocab[i] for i in x.ravel()) == "dabcdabc" and y[-1, -1] == 3  # é is the one left over


def test_a_wikitext_raw_directory_is_read(tmp_path):
    wiki = tmp_path / "wikitext-103-raw"
    wiki.mkdir()
    (wiki / "wiki.train.raw").write_text(" = Valkyria = \n Senjō no Valkyria 3 \n" * 20)
    (wiki / "wiki.valid.raw").write_text(" = Homarus = \n lobster \n" * 10)
    (wiki / "wiki.test.raw").write_text("not read")
    c = Chars(path=str(wiki), block_size=8, val_chars=0).generate()
    assert len(c.train) == 20 * len(" = Valkyria = \n Senjō no Valkyria 3 \n") and "ō" in c.vocab
    assert len(c.val) == 10 * len(" = Homarus = \n lobster \n")
    assert c.unknown == sum(ch not in c.vocab for ch in " = Homarus = \n lobster \n" * 10)
    r = job.run(compose("problem=chars", f"problem.path={wiki}", "problem.block_size=8", "method=bigram"))
    assert r.metrics["vocab_size"] == c.vocab_size and 0 < r.metrics["accuracy"] < 1


def test_the_shipped_corpus_needs_no_path():
    c = Chars().generate()
    assert (len(c.train) + len(c.val), len(c.vocab)) == (1_115_394, 65)
    assert c.val_blocks()[1].size == 16384


def test_bad_corpus_settings_are_one_line_before_any_job(tmp_path):
    with pytest.raises(ConfigError, match=r"^problem.path='.*nowhere' does not exist: expected a text file"):
        check_job(compose("problem=chars", f"problem.path={tmp_path / 'nowhere'}", "method=bigram"))
    with pytest.raises(ConfigError, match=r"is a directory without wiki.train.raw, wiki.valid.raw"):
        check_job(compose("problem=chars", f"problem.path={tmp_path}", "method=bigram"))
    (tmp_path / "wiki.train.raw").write_text("a" * 200)
    (tmp_path / "wiki.valid.raw").mkdir()  # there, and called missing (a prober's round)
    with pytest.raises(ConfigError, match=r"is a directory whose wiki.valid.raw is not a file: expected a text file"):
        check_job(compose("problem=chars", f"problem.path={tmp_path}", "method=bigram"))
    os.mkfifo(tmp_path / "fifo.txt")  # there, and called missing (a prober's round of issue 43)
    with pytest.raises(ConfigError, match=r"^problem.path='.*fifo.txt' is not a regular file: expected a text file"):
        check_job(compose("problem=chars", f"problem.path={tmp_path / 'fifo.txt'}", "method=bigram"))
    # a prober's round: a name the filesystem refuses ran the job, then failed it with the OSError (exit 1); a
    # user's file of such a name (method.path) was the OSError's traceback
    long = f"{tmp_path}/{'z' * 300}"
    with pytest.raises(
        ConfigError, match=r"^problem.path='.*\.\.\. \(\d+ characters\)': File name too long: expected a"
    ):
        check_job(compose("problem=chars", f"problem.path={long}.txt", "method=bigram"))
    from sweep.sandbox.target import find  # noqa: PLC0415

    with pytest.raises(ConfigError, match=r"^method.path=.*\.\.\. \(\d+ characters\): File name too long: expected <"):
        find(f"{long}.py:train")
    with pytest.raises(ConfigError, match=r"^method=gpt trains with torch: device=cpu is numpy; use device=torch"):
        check_job(compose("problem=chars", "method=gpt"))
    with pytest.raises(ConfigError, match=r"^method.n_head=3 is not allowed: expected a divisor of method.n_embd"):
        check_job(compose("problem=chars", "method=gpt", "method.n_head=3", *DEVICE))
    with pytest.raises(ConfigError, match=r"^method=sgd does not apply to problem=chars"):
        check_job(compose("problem=chars", "method=sgd"))
    proc = run_sweep("problem=chars", f"problem.path={tmp_path / 'nowhere'}", "method=bigram", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0, proc.stderr
    assert "does not exist" in proc.stderr and not (tmp_path / "mlruns").exists()


def test_a_bad_corpus_or_a_size_no_run_survives_is_refused_before_any_job_of_a_sweep(tmp_path):
    """Issue 43: a corpus that is not UTF-8 was refused by a single run but ran (and failed) every job of a sweep;
    a char model's size beyond memory ended in torch's allocation traceback and a FAILED record; smt's search
    beyond any wait ran until killed. Each: one line naming the job and the field, exit 2, nothing run or made."""
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes(b"caf\xe9 " * 200)
    good = words_file(tmp_path)
    for args, said in (
        (("-m", "problem=chars", "method=bigram", f"problem.path={latin1},{good}"), "latin1.txt is not UTF-8 text"),
        (("-m", "problem=chars", "method=gpt", *DEVICE, "method.n_embd=64,200000"), "lower method.n_embd=200000"),
        (("method=smt", "problem.n_bits=300", "problem.k_sparse=12"), "cannot end in time"),
    ):
        proc = run_sweep(*args, cwd=tmp_path)
        assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0, proc.stderr
        assert said in proc.stderr and "[FINISHED]" not in proc.stdout, proc.stderr
        assert not (tmp_path / "mlruns").exists()


def test_an_empty_corpus_path_is_called_empty_not_the_working_directory():
    """`problem.path=''` was read as the working directory: "is a directory without wiki.train.raw, ..."."""
    with pytest.raises(ConfigError) as e:
        check_job(compose("problem=chars", "method=bigram", "problem.path=''"))
    assert str(e.value).startswith("problem.path='' is empty: expected a text file, a WikiText-103 raw directory")


@pytest.mark.parametrize("method", ["mlp_lm", "gpt"])
def test_same_seed_same_metrics_on_cpu(method):
    cfg = compose("problem=chars", f"method={method}", *DEVICE, *SMALL_VAL, *TINY[method], "tracker=none")
    a, b = job.run(cfg), job.run(cfg)
    timed = ("wall_clock_s", "warmup_s", "cost_usd", "tokens_per_s")
    assert {k: v for k, v in a.metrics.items() if k not in timed} == {
        k: v for k, v in b.metrics.items() if k not in timed
    }
    assert a.curves == b.curves and len(a.curves["test_accuracy"]) == 3  # an evaluation every 10 of 30 steps
    step = a.curves["train_loss_step"]  # every step's loss; the evaluations' train_loss is its mean since the last
    assert len(step) == 30 and a.curves["train_loss"][-1] == pytest.approx(sum(step[20:]) / 10, rel=1e-5)
    other = job.run(compose("problem=chars", f"method={method}", *DEVICE, *SMALL_VAL, *TINY[method], "problem.seed=7"))
    assert other.metrics["train_loss"] != a.metrics["train_loss"]


def test_gpt_beats_the_bigram_on_held_out_text(tmp_path):
    corpus = ("problem=chars", f"problem.path={words_file(tmp_path)}", "problem.block_size=8", "problem.val_chars=0")
    bigram = job.run(compose(*corpus, "method=bigram"))
    gpt = job.run(
        compose(
            *corpus,
            "method=gpt",
            *DEVICE,
            "method.n_embd=32",
            "method.n_layer=1",
            "method.max_steps=100",
            "method.eval_interval=50",
            "method.warmup_steps=10",
        )
    )
    assert bigram.metrics["accuracy"] == pytest.approx(2 / 3, abs=0.03)
    assert gpt.metrics["accuracy"] > bigram.metrics["accuracy"] + 0.1, (gpt.metrics, bigram.metrics)
    assert gpt.metrics["bits_per_char"] < bigram.metrics["bits_per_char"]


def test_the_gpt_stops_at_its_target(tmp_path):
    corpus = ("problem=chars", f"problem.path={words_file(tmp_path)}", "problem.block_size=8")
    r = job.run(
        compose(
            *corpus, "method=gpt", *DEVICE, "method.n_embd=16", "method.n_layer=1", "method.eval_interval=5",
            "method.target_accuracy=0.5", "method.max_steps=500", "tracker=none",
        )
    )  # fmt: skip
    assert r.metrics["reached_target"] == 1.0 and r.metrics["accuracy"] >= 0.5
    assert r.metrics["steps"] < 500 and r.metrics["steps"] % 5 == 0
    assert r.metrics["tokens"] == r.metrics["steps"] * 32 * 8


def traced_phases(model, opt, x, y):
    """A gpt step traced in two parts: forward and backward, then the optimizer; the parameters' names."""
    import torch.nn.functional as F

    from sweep.trace.auto import TorchTracer

    names = {f"param.{n}": p for n, p in model.named_parameters()}
    trace = Trace()
    with TorchTracer(trace, {**names, "x": x, "y": y}) as tracer:
        F.cross_entropy(model(x).flatten(0, 1), y.flatten()).backward()
        tracer.end_step()
        opt.step()
        tracer.end_step()
    (fwd_bwd, optim), seq = trace.segments()
    assert seq == [0, 1]
    return fwd_bwd, optim, set(names)


def test_a_traced_gpt_step_reads_every_parameter_and_the_optimizer_writes_every_one():
    torch = pytest.importorskip("torch")
    from sweep.methods.lm.gpt_model import GPTModel
    from sweep.methods.lm.train import adamw
    from sweep.methods.lm.training import Training

    torch.manual_seed(0)
    model = GPTModel(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=8, dropout=0.0)
    opt = adamw(model, Training(), "cpu")
    x, y = torch.randint(0, 11, (4, 8)), torch.randint(0, 11, (4, 8))
    fwd_bwd, optim, params = traced_phases(model, opt, x, y)
    assert len(params) == 2 + 2 * 6 + 1  # wte (tied to lm_head), wpe; per block 2 norms + 4 matrices; ln_f
    read = {name for op, name, _ in fwd_bwd if op == READ}
    written = {name for op, name, _ in optim if op == WRITE}
    assert params <= read, params - read
    assert params <= written, params - written
    opened = len(params) + 2  # the tracer writes what it names as it opens
    assert not {name for op, name, _ in fwd_bwd[opened:] if op == WRITE} & params  # no update before the optimizer


def test_a_traced_run_records_one_step_times_its_steps():
    pytest.importorskip("torch")
    r = job.run(
        compose(
            "problem=chars", "method=gpt", *DEVICE, *SMALL_VAL, *TINY["gpt"], "tracker=energy", "tracker.meter=none"
        )
    )
    m = r.metrics
    assert m["steps"] == 30
    for k in ("dmd", "dmc", "total_floats", "energy_pj", "reads", "writes"):
        assert m[k] == pytest.approx(m[f"{k}_per_step"] * 30) and m[k] > 0, k
    assert m["ard"] == m["ard_per_step"] > 0
    assert all(math.isfinite(m[k]) for k in ("bits_per_char", "train_loss", "tokens_per_s"))


def test_char_lm_preset_arms():
    arms = {}
    for arm in ("bigram", "mlp_lm", "gpt32", "gpt64", "gpt128"):
        c = compose("sweeps=char_lm", f"+sweeps/char_lm_arm={arm}", hydra_section=True)
        assert (c.problem.name, c.device.name, c.device.dtype, c.tracker.name) == (
            "chars",
            "torch_cpu",
            "float32",
            "energy",
        )
        arms[arm] = (c.method.name, c.method.get("n_embd"), c.method.get("max_steps"))
    assert arms == {
        "bigram": ("bigram", None, None),
        "mlp_lm": ("mlp_lm", 24, 300),
        "gpt32": ("gpt", 32, 300),
        "gpt64": ("gpt", 64, 300),
        "gpt128": ("gpt", 128, 300),
    }
    assert c.hydra.sweeper.params["problem.seed"] == "42,43,44"
    assert dict(c.compare.front) == {"accuracy": "maximize", "energy_pj": "minimize"}


@pytest.mark.slow
def test_the_three_models_record_their_figures_in_one_command(store, tmp_path):
    """The issue's command, on short contexts: three runs, each with the figures a character model records."""
    from mlflow.tracking import MlflowClient

    small = ("problem.block_size=8", "problem.val_chars=512", "device.dtype=float32", "device.threads=1")
    proc = run_sweep("-m", "problem=chars", "method=bigram,mlp_lm,gpt", "device=torch_cpu", *small, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    client = MlflowClient(store)
    exp = client.get_experiment_by_name("sweep").experiment_id
    runs = {r.data.params["method.name"]: r for r in client.search_runs([exp]) if "method.name" in r.data.params}
    assert set(runs) == {"bigram", "mlp_lm", "gpt"}
    figures = ("accuracy", "bits_per_char", "steps", "tokens_per_s", "wall_clock_s", "cost_usd", "ard", "reads")
    for name, r in runs.items():
        assert set(figures) <= set(r.data.metrics), (name, sorted(r.data.metrics))
    for name in ("mlp_lm", "gpt"):
        m = runs[name].data.metrics
        assert m["steps"] == 1000 and {"train_loss", "ard_per_step", "total_floats_per_step"} <= set(m)
        assert m["accuracy"] > runs["bigram"].data.metrics["accuracy"], name
        history = client.get_metric_history(runs[name].info.run_id, "test_accuracy")
        assert len(history) == 10  # an evaluation every 100 steps


@pytest.mark.slow
def test_char_lm_runs_and_compares_with_its_front(store, tmp_path):
    from sweep.report import compare

    shrunk = (
        "+sweeps/char_lm_arm=bigram,gpt32",
        "problem.seed=42,43",
        "problem.block_size=16",
        "problem.val_chars=1024",
    )
    proc = run_sweep("sweeps=char_lm", *shrunk, "tracker.meter=none", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    cmp, files = compare.compare("char_lm", out_dir=tmp_path / "cmp")
    assert [r.key["method.name"] for r in cmp.rows] == ["bigram", "gpt"] and all(r.finished == 2 for r in cmp.rows)
    assert {"accuracy", "bits_per_char", "steps", "tokens_per_s", "energy_pj"} <= set(cmp.metrics)
    assert cmp.front is not None and 1 <= len(cmp.front.rows) <= 2
    assert {"char_lm.png", "char_lm-curves.png", "front.md"} <= {f.name for f in files}
    gpt = cmp.rows[1]
    assert gpt.curves["eval_step"][0] == [50.0, 100.0, 150.0, 200.0, 250.0, 300.0]  # the curves' x: training steps


def test_the_gpt_compiles_and_runs_under_autocast():
    pytest.importorskip("torch")
    base = ("problem=chars", "method=gpt", *DEVICE, *SMALL_VAL, *TINY["gpt"], "tracker=none")
    for knobs in (("device.compile=true", "device.compile_backend=aot_eager"), ("device.autocast=bfloat16",)):
        r = job.run(compose(*base, *knobs))
        assert r.metrics["steps"] == 30 and 0 < r.metrics["accuracy"] < 1 and math.isfinite(r.metrics["bits_per_char"])
        assert r.metrics["warmup_s"] > 0, knobs


def test_gpt_attention_written_out_and_checkpointing_compute_the_same_and_move_more():
    """method.attention=math and method.checkpoint=true (sweeps=proxy_study) change the data a step moves, not its
    result: the same logits and gradients as torch's fused attention without checkpointing; the traced step of the
    written-out attention moves more floats (the T x T scores), the checkpointed one too (its forward again)."""
    torch = pytest.importorskip("torch")
    from sweep.methods.lm.gpt_model import GPTModel
    from sweep.methods.lm.train import adamw
    from sweep.methods.lm.training import Training

    x, y = torch.randint(0, 11, (4, 8)), torch.randint(0, 11, (4, 8))
    moved, grads = {}, {}
    for attention, checkpoint in (("sdpa", False), ("math", False), ("sdpa", True)):
        torch.manual_seed(0)
        model = GPTModel(11, 8, 2, 2, 8, 0.0, attention, checkpoint)
        fwd_bwd, _, _ = traced_phases(model, adamw(model, Training(), "cpu"), x, y)
        moved[attention, checkpoint] = sum(size for _, _, size in fwd_bwd)
        grads[attention, checkpoint] = [p.grad.clone() for p in model.parameters()]
    for key in (("math", False), ("sdpa", True)):
        assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(grads[key], grads["sdpa", False])), key
    assert moved["math", False] > moved["sdpa", False] and moved["sdpa", True] > moved["sdpa", False]
