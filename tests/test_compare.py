"""sweep.report.compare against a real MLflow store filled with real job results (no mocks)."""

from __future__ import annotations

import re
import statistics
import subprocess
import sys

import pytest
from mlflow.tracking import MlflowClient

from sweep import job
from sweep.record.recorder import Recorder
from sweep.record.session import failed_result
from sweep.report import compare as cmpmod
from sweep.report import grouping, queries, study
from sweep.report.leaderboard import Leaderboard
from tests.conftest import compose, record_small_sweep, run_sweep
from tests.test_presets import PRESETS

SMALL = ("problem.n_bits=12", "problem.n_test=50")


@pytest.fixture(scope="module")
def sweep_store(tmp_path_factory):
    """A parent run 'demo' (overrides say sweeps=demo) with gf2/km x seeds 42,43 + one failed cuda-like job.
    One store for the module: creating an MLflow SQLite store costs seconds."""
    store = f"sqlite:///{tmp_path_factory.mktemp('compare') / 'mlflow.db'}"
    rec, parent, results = record_small_sweep(store, "demo", "demo", *SMALL)
    bad_cfg = compose("method=gf2", "device=torch_cpu", *SMALL)
    failed = failed_result(bad_cfg, RuntimeError("no CUDA GPU here: device unavailable"))
    rec.log(failed, parent_run_id=parent)
    rec.end_parent(parent, "FAILED", [*results, failed])
    return store, parent, results


def test_a_disk_that_fills_mid_report_leaves_no_half_a_file_and_names_what_was_written(sweep_store, tmp_path):
    """`sweep-compare --out` on a disk with room for one file: it left a 0-byte table.md beside table.csv and
    said "table and plot not written". Each file is whole or not there, and the line names those written."""
    import os

    from tests.disks import fill, tmpfs

    store, parent, results = sweep_store
    with tmpfs(tmp_path / "disk", "64k") as disk:
        filler = fill(disk)
        os.truncate(filler, filler.stat().st_size - 4096)  # one page free: table.csv's
        cmp, files = cmpmod.compare("demo", store, disk / "c", log=False)
        left = {f.name: f.stat().st_size for f in (disk / "c").iterdir()}
    assert files == [] and "No space left on device" in cmp.unwritten
    assert (
        list(left) == ["table.csv"] and left["table.csv"] > 0 and "(those before it were: table.csv)" in cmp.unwritten
    )


def test_groups_by_swept_keys_and_aggregates_seeds(sweep_store, tmp_path):
    store, parent, results = sweep_store
    cmp, files = cmpmod.compare("demo", store, tmp_path / "out")
    assert cmp.parent_id == parent and cmp.study == "demo"
    # method and device vary; seeds are aggregated, method.* keys of one method only are not "swept"
    assert cmp.keys == ["device.name", "method.name"]
    rows = {(r.key["device.name"], r.key["method.name"]): r for r in cmp.rows}
    assert set(rows) == {("cpu", "gf2"), ("cpu", "km"), ("torch_cpu", "gf2")}
    km = rows[("cpu", "km")]
    walls = [r.metrics["wall_clock_s"] for r in results if r.tags["method"] == "km"]
    assert km.finished == km.total == 2
    assert km.stats["wall_clock_s"].mean == pytest.approx(statistics.fmean(walls))
    assert km.stats["wall_clock_s"].std == pytest.approx(statistics.stdev(walls))
    assert km.stats["accuracy"].n == 2 and "ard" in cmp.metrics and "cost_usd" in cmp.metrics
    # the failed group keeps its reason, read from the child's traceback artifact
    bad = rows[("torch_cpu", "gf2")]
    assert bad.finished == 0 and "device unavailable" in bad.failure
    assert "device unavailable" in cmp.markdown()
    # files written and logged on the parent run
    assert [f.name for f in files] == ["table.csv", "table.md", "demo.png"]
    assert files[2].stat().st_size > 5000
    logged = {a.path for a in MlflowClient(store).list_artifacts(parent, "compare")}
    assert logged == {"compare/table.csv", "compare/table.md", "compare/demo.png"}
    header = files[0].read_text().splitlines()[0].split(",")
    assert header[:4] == ["device.name", "method.name", "finished", "total"] and "ard_mean" in header


def test_cli_markdown_by_run_id(sweep_store, tmp_path, capsys):
    store, parent, _ = sweep_store
    args = ["--tracking-uri", store, "--out", str(tmp_path / "o"), "--no-log"]
    assert cmpmod.main([parent, "--markdown", *args]) == 0
    out = capsys.readouterr().out
    assert out.startswith("| device.name | method.name | runs | accuracy |")
    assert "| cpu | km | 2/2 | 1.000 ± 0.000 |" in out
    # the console table with every column (--wide), wider than the 80 columns of a pipe, keeps every number whole
    assert cmpmod.main([parent, "--no-plot", "--wide", *args]) == 0
    row = next(ln for ln in capsys.readouterr().out.splitlines() if " km " in ln and "2/2" in ln)
    assert "…" not in row and "1.000 ± 0.000" in row and len(row) > 80
    assert not {a.path for a in MlflowClient(store).list_artifacts(parent, "compare")} - {
        "compare/table.csv",
        "compare/table.md",
        "compare/demo.png",
    }  # --no-log: nothing new


def test_latest_parent_wins_and_unknown_study_fails(sweep_store, tmp_path, capsys):
    store = sweep_store[0]
    r = job.run(compose("method=gf2", "problem.n_bits=10"))
    parents = []
    for exp in ("again", "elsewhere"):  # same preset, other experiment: found by its overrides tag
        rec = Recorder(store, exp)
        parents.append(rec.start_parent("again", {"sweep.overrides": "sweeps=again problem.n_bits=10"}))
        rec.log(r, parent_run_id=parents[-1])
        rec.end_parent(parents[-1], "FINISHED", [r])
    client = MlflowClient(store)
    assert queries.find_parent(client, "again").info.run_id == parents[1]
    assert queries.find_parent(client, parents[0]).info.run_id == parents[0]
    # an experiment's name (`sweep -m mlflow.experiment=elsewhere sweeps=again`, then `sweep-compare elsewhere`,
    # was "no sweep parent run found"): its latest sweep, compared as its study, the output says which
    assert cmpmod.main(["elsewhere", "--no-log", "--no-plot", "--tracking-uri", store, "--out", str(tmp_path)]) == 0
    said = capsys.readouterr().out
    assert f"again: parent run {parents[1]}, experiment elsewhere (its latest sweep)\n" in said
    assert cmpmod.main(["no_such_study", "--no-log", "--tracking-uri", store]) == 2
    assert "no sweep parent run found for 'no_such_study'" in capsys.readouterr().err
    # issue 43, seventh round: a job's id or a single run's was "parent run ... has no child runs"
    child = MlflowClient(store).search_runs([MlflowClient(store).get_run(parents[0]).info.experiment_id])
    job_id = next(c.info.run_id for c in child if c.info.run_id != parents[0])
    single = Recorder(store, "again").log(r)
    for ref, what in ((job_id, f"a job of the sweep whose parent run is {parents[0]}"), (single, "a single run")):
        assert cmpmod.main([ref, "--no-log", "--tracking-uri", store]) == 2
        assert capsys.readouterr().err == (
            f"sweep-compare: run {ref} is {what}{', of no sweep' if ref == single else ''}: expected a sweep's parent "
            "run id, a study or an experiment\n"
        )
    # a misspelt study or experiment gets the closest names of the store's studies, experiments and the presets,
    # never a command that fails (`sweep sweeps=agian` was printed: no such preset); a preset not run yet, the
    # command that runs it
    for typed, meant in (("agian", "again"), ("elsewher", "elsewhere")):
        assert cmpmod.main([typed, "--no-log", "--tracking-uri", store]) == 2
        said = capsys.readouterr().err
        assert said.count("\n") == 1 and "sweeps=" not in said, said
        assert said.startswith(
            f"sweep-compare: no sweep parent run found for '{typed}': did you mean {meant}? expected a study or an "
            "experiment of the store, a preset (sweeps/<name>.yaml) or a parent run id (the store's studies: "
        ), said
        assert "; experiments with a sweep: elsewhere)" in said, said
    # --out naming a file (a fresh prober's round): the table came, then "File exists", exit 1
    (tmp_path / "a_file").write_text("")
    assert cmpmod.main(["elsewhere", "--no-log", "--tracking-uri", store, "--out", str(tmp_path / "a_file")]) == 2
    out, err = capsys.readouterr()
    assert (
        not out
        and err
        == f"sweep-compare: --out {tmp_path / 'a_file'} is a file: expected a directory (made where there is none)\n"
    )
    # ... under a file (the table came, then "Not a directory", exit 1), a name too long (an OSError's traceback)
    for out, said in (
        (tmp_path / "a_file" / "sub", f"{tmp_path / 'a_file' / 'sub'}: {tmp_path / 'a_file'} is a file"),
        ("x" * 300, f"{'x' * 60}... (300 characters): File name too long"),
    ):
        assert cmpmod.main(["elsewhere", "--no-log", "--tracking-uri", store, "--out", str(out)]) == 2
        assert capsys.readouterr() == (
            "",
            f"sweep-compare: --out {said}: expected a directory (made where there is none)\n",
        )
    assert cmpmod.main(["tiled_w", "--no-log", "--tracking-uri", store]) == 2
    assert "did you mean tiled_w1? " in capsys.readouterr().err
    assert cmpmod.main(["tiled_w1", "--no-log", "--tracking-uri", store]) == 2
    assert " sweeps=tiled_w1` first (the store's studies: " in capsys.readouterr().err


def test_swept_keys_ignore_keys_of_one_group_choice():
    params = [
        {"method.name": "sgd", "method.hidden": "200", "problem.seed": "42", "method._target_": "a"},
        {"method.name": "gf2", "method.max_rows": "0", "problem.seed": "43", "method._target_": "b"},
        {"method.name": "sgd", "method.hidden": "200", "problem.seed": "43", "method._target_": "a"},
    ]
    assert grouping.swept_keys(params) == ["method.name"]
    params.append({"method.name": "sgd", "method.hidden": "500", "problem.seed": "42"})
    assert grouping.swept_keys(params) == ["method.hidden", "method.name"]


def test_group_columns_baseline_and_learning_curves(sweep_store, tmp_path):
    # sgd (the baseline arm) vs sign_sgd x two seeds: reads/writes/total_floats/dmc columns, "% vs baseline" and
    # speed-up cells computed from the table's own means, per-epoch curves averaged over seeds into a plot
    store = sweep_store[0]
    rec, parent = Recorder(store, "curves"), None
    parent = rec.start_parent("sweep sweeps=curves", {"sweep.overrides": "sweeps=curves"})
    results = []
    for method in ("sgd", "sign_sgd"):
        for seed in (42, 43):
            r = job.run(
                compose(
                    f"method={method}",
                    f"problem.seed={seed}",
                    "problem.n_bits=8",
                    "problem.n_test=50",
                    "method.max_epochs=40",
                )
            )
            rec.log(r, parent_run_id=parent)
            results.append(r)
    rec.end_parent(parent, "FINISHED", results)
    settings = {"baseline": {"method.name": "sgd"}, "relative": {"epochs": "speedup", "ard": "percent"}}
    cmp, files = cmpmod.compare("curves", store, tmp_path / "out", settings=settings)
    assert cmp.keys == ["method.name"]
    assert {"reads", "writes", "total_floats", "dmc"} <= set(cmp.metrics)
    assert cmp.relative == ["epochs speed-up", "ard vs base"]
    sgd, sign = (next(r for r in cmp.rows if r.key["method.name"] == m) for m in ("sgd", "sign_sgd"))
    assert sgd.relative == {"epochs speed-up": "baseline", "ard vs base": "baseline"}
    speedup = sgd.stats["epochs"].mean / sign.stats["epochs"].mean
    assert sign.relative["epochs speed-up"] == f"{speedup:.3g}x"
    pct = (sign.stats["ard"].mean - sgd.stats["ard"].mean) / sgd.stats["ard"].mean * 100
    assert sign.relative["ard vs base"] == f"{pct:+.1f}%"
    assert cmp.header()[-2:] == ["epochs speed-up", "ard vs base"] and "baseline" in cmp.markdown()
    # curves: one point per epoch of the longest seed; a seed that stopped early keeps its last value
    runs = [r for r in results if r.tags["method"] == "sgd"]
    longest = max(len(r.curves["test_loss"]) for r in runs)
    mean, std = sgd.curves["test_loss"]
    assert len(mean) == longest
    last = [r.curves["test_loss"][-1] for r in runs]
    assert mean[-1] == pytest.approx(statistics.fmean(last)) and std[-1] == pytest.approx(statistics.pstdev(last))
    assert mean[0] == pytest.approx(statistics.fmean(r.curves["test_loss"][0] for r in runs))
    assert set(sgd.curves) == set(queries.CURVES) - {"eval_step"}  # eval_step: the character models' x axis
    assert [f.name for f in files][-2:] == ["curves.png", "curves-curves.png"]
    assert files[-1].stat().st_size > 10000


def test_torch_overhead_plots_seconds_against_width_one_line_per_arm(tmp_path):
    # seed 004's arms differ in five device keys: the plot names each arm by what it turns on, not by device alone
    from sweep.report.plots import _arm_label, plot_comparison
    from sweep.report.table import Comparison, Row, Stat

    keys = ["device.autocast", "device.compile", "device.compile_mode", "device.name", "method.hidden"]
    arms = [
        ("none", "False", "default", "cpu"),
        ("none", "True", "max-autotune", "torch_cpu"),
        ("bfloat16", "False", "default", "torch_cpu"),
        ("none", "False", "default", "cuda"),
    ]
    rows = []
    for arm in arms:
        for h in ("64", "1024"):
            done = arm[3] != "cuda"
            stats = {"wall_clock_s": Stat(0.1 * int(h) / 64, 0.01, 3), "warmup_s": Stat(2.0, 0.1, 3)} if done else {}
            rows.append(Row(dict(zip(keys, (*arm, h))), 3 * done, 3, stats, "" if done else "FAILED: no token"))
    cmp = Comparison("torch_overhead", "p", "torch_overhead", keys, ["wall_clock_s", "warmup_s"], rows)
    assert [_arm_label(r, keys[:-1]) for r in rows[::2]] == [
        "cpu",
        "torch_cpu compile max-autotune",
        "torch_cpu bfloat16",
        "cuda",
    ]
    png = plot_comparison(cmp, tmp_path / "torch_overhead.png")
    assert png.stat().st_size > 10_000


def test_a_resumed_sweep_is_compared_whole(store, tmp_path):
    # a sweep cut short, then re-run: the re-run skips the finished job and records the other under a new
    # parent run; compare shows the sweep's two jobs, not just the re-run's one
    args = ("-m", "method=gf2,km", "problem.n_bits=10", "problem.n_test=50", "mlflow.experiment=resumed")
    first = run_sweep(*args, cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    client = MlflowClient(store)
    exp = client.get_experiment_by_name("resumed").experiment_id
    km = [r for r in client.search_runs([exp], "params.`method.name` = 'km'")]
    assert len(km) == 1
    client.delete_run(km[0].info.run_id)  # as if the first command had died before km was recorded
    second = run_sweep(*args, cwd=tmp_path)
    assert second.returncode == 0, second.stderr[-2000:]
    parents = client.search_runs([exp], "tags.`sweep.parent` = 'true'", order_by=["attributes.start_time DESC"])
    assert len(parents) == 2 and len(queries.load_children(client, parents[0])) == 1  # only km ran again
    cmp, _ = cmpmod.compare("resumed", store, tmp_path / "out", log=False, plot=False)
    assert cmp.parent_id == parents[0].info.run_id
    assert {r.key["method.name"]: (r.finished, r.total) for r in cmp.rows} == {"gf2": (1, 1), "km": (1, 1)}


def test_a_sweep_with_done_jobs_is_compared_over_all_its_runs(store, tmp_path):
    """A sweep one of whose jobs another sweep had done compared "over 1 run" of 2; a re-run whose jobs were all
    done, then the `sweep-compare` it printed, showed the study's latest sweep with children (another command's),
    not its own. The parent names the runs it skipped as done; the report reads them with its children."""
    common = ("problem.n_bits=10", "problem.n_test=50", "mlflow.experiment=rerun")
    first = ("-m", "method=gf2,km", "problem.seed=42", *common)
    for args in (first, ("-m", "method=gf2", "problem.seed=42,43", *common), first):
        p = run_sweep(*args, cwd=tmp_path)
        assert p.returncode == 0, p.stderr[-2000:]
    assert "sweep: 0 job(s) finished, 0 failed, 2 skipped" in p.stdout, p.stdout
    printed = p.stdout.strip().splitlines()[-1]  # next: <sweep-compare rerun ...>  ·  <sweep-ui ...>  →  <address>
    assert printed.startswith("next: ") and " rerun " in printed.split("  ·  ")[0] + " ", printed
    client = MlflowClient(store)
    exp = client.get_experiment_by_name("rerun").experiment_id
    parents = client.search_runs([exp], "tags.`sweep.parent` = 'true'", order_by=["attributes.start_time ASC"])
    assert [len(queries.load_children(client, p)) for p in parents] == [2, 1, 0]
    cmp, _ = cmpmod.compare("rerun", store, tmp_path / "out", log=False, plot=False)
    assert cmp.parent_id == parents[2].info.run_id  # the re-run itself, its runs the first sweep's
    assert {(r.key.get("method.name"), r.finished) for r in cmp.rows} == {("gf2", 1), ("km", 1)}, cmp.rows
    second, _ = cmpmod.compare(parents[1].info.run_id, store, tmp_path / "out2", log=False, plot=False)
    assert sum(r.total for r in second.rows) == 2  # seed 42 done by the first sweep, seed 43 its own


def test_a_leaderboard_at_80_columns_keeps_every_column_and_every_figure_whole():
    """At 80 columns (a pipe, a small terminal) rich shrank the lone wrapping column to nothing (no entrant column)
    and cut figures without a mark ("1,937,859,26"): the console is widened to the least width that keeps each
    figure whole and each wrapping column 20 wide, and the long names wrap there."""
    import io
    from types import SimpleNamespace

    from rich.console import Console

    from sweep.report.leaderboard import Entry

    runs = [SimpleNamespace(info=SimpleNamespace(status="FINISHED"))] * 2
    figures = {"accuracy": 1.0, "dmd": 3_149_136_241, "bytedmd": 2_836_230_585, "energy_pj": 3.784e9}
    long = "/home/someone/solvers/a_rather_long_directory/honest.py:solve"
    board = Leaderboard(
        "parity_challenge", "p" * 32, "parity_challenge", "s" * 16, ["1"], {"accuracy": 0.95},
        [Entry("sweep.challenge.references:smt", runs, means=figures), Entry(long, runs, means=figures)],
        [Entry(long, runs, ["outside numpy: 882 values taken out of arrays into Python (allowed 20)"], figures)],
    )  # fmt: skip
    tables = board.rich_tables()
    out = io.StringIO()
    console = cmpmod.fitting(Console(width=80, file=out), tables)
    assert 80 < console.width < 120
    for t in tables:
        console.print(t)
    text = out.getvalue()
    heads = [line.split() for line in text.splitlines() if line.lstrip().startswith(("rank", "entrant"))]
    assert heads[0][:3] == ["rank", "entrant", "runs"] and heads[1][:2] == ["entrant", "runs"], text
    assert text.count("3,149,136,241") == 3 and text.count("2,836,230,585") == 2 and "3.784e+09" in text, text
    assert "smt (reference)" in text
    # a long name wraps in its column after a separator, each part of it whole ("examples/solvers/python_lists.py:so"
    # then "lve" was mid-name)
    assert all(part in text for part in ("/home/someone/", "solvers/", "honest.py:solve")), text
    assert "a_rather_long_directory/" in text, text  # a piece wider than WRAPPED_MIN widens its column
    # the disqualified's bytedmd and energy are left out of the terminal, and said: --wide shows them
    wide = board.rich_tables(wide=True)
    assert board.hidden() == 2 and len(wide[1].columns) == len(tables[1].columns) + 2


# -- the terminal table and the paired plot ---------------------------------------------------------------------
TILED_SMALL = (
    "sweeps=tiled_w1",
    "problem.n_bits=8",
    "problem.n_train=40",
    "problem.n_test=20",
    "method.hidden=20",
    "method.max_epochs=2",
)


@pytest.fixture(scope="module")
def tiled_store(sweep_store):
    """A small tiled_w1 sweep (its preset's compare settings; hidden 20, tiles 5 and 10, seeds 42-44), recorded
    in experiment 'tiled_small' of the module's store. Returns (store, results by (arm, seed))."""
    store = sweep_store[0]
    rec = Recorder(store, "tiled_small")
    parent = rec.start_parent("sweep sweeps=tiled_w1", {"sweep.overrides": "sweeps=tiled_w1"})
    results, by = [], {}
    for arm in ("variant=standard", "variant=tiled variant.tile_size=5", "variant=tiled variant.tile_size=10"):
        for seed in (42, 43, 44):
            r = job.run(compose(*TILED_SMALL, *arm.split(), f"problem.seed={seed}"))
            rec.log(r, parent_run_id=parent)
            results.append(r)
            by[(arm.split("=")[-1], seed)] = r
    rec.end_parent(parent, "FINISHED", results)
    return store, by


def _printed(argv: list[str], capsys) -> list[str]:
    assert cmpmod.main(argv) == 0
    return capsys.readouterr().out.splitlines()


def test_terminal_table_fits_120_columns_with_the_studys_key_metrics(tiled_store, tmp_path, capsys, monkeypatch):
    store, _ = tiled_store
    monkeypatch.setenv("COLUMNS", "120")
    args = ["tiled_w1", "--tracking-uri", store, "--out", str(tmp_path / "o"), "--no-log", "--no-plot"]
    lines = _printed(args, capsys)
    table = lines[: lines.index(next(ln for ln in lines if ln.startswith("wrote")))]
    assert max(len(ln) for ln in table) <= 120
    head = "\n".join(table[:6])
    # the preset's key metrics, each with its column against the baseline; the rest left to --wide
    assert study.study_settings("tiled_w1")["metrics"] == ["ard", "cache_hit_rate", "energy_pj", "accuracy"]
    assert "ard" in head and "energy_pj" in head and "vs" in head and "total_floats" not in head
    row = next(ln.split() for ln in table if ln.split()[:2] == ["tiled", "10"])
    assert row[3] == "±" and row[5].endswith("%") and row[5][0] in "+-"  # ard ± std, then its change vs base
    assert any("more columns with --wide" in ln for ln in lines)
    # --wide: every column, as in the artifacts, which hold every one whatever the terminal shows
    wide = "\n".join(_printed([*args, "--wide"], capsys))
    md = (tmp_path / "o" / "table.md").read_text()
    csv_head = (tmp_path / "o" / "table.csv").read_text().splitlines()[0]
    for column in ("total_floats", "dmd", "wall_clock_s", "cache_hit_rate vs base", "energy_pj vs base"):
        assert column in wide and column in md
    assert "total_floats_mean" in csv_head and "dmd_std" in csv_head


def test_a_paired_study_plots_each_seeds_change_against_the_baseline(tiled_store, tmp_path):
    from sweep.report.plots import tiled_figure

    store, by = tiled_store
    cmp, files = cmpmod.compare("tiled_w1", store, tmp_path / "out", log=False)
    assert cmp.paired and cmp.change["ard"] == "percent" and files[2].name == "tiled_w1.png"
    fig = tiled_figure(cmp)
    ax = next(a for a in fig.axes if a.get_title().startswith("ARD"))
    assert "% change vs base" in ax.get_ylabel()
    drawn = {ln.get_gid(): list(ln.get_ydata()) for ln in ax.get_lines() if (ln.get_gid() or "").startswith("problem")}
    want = {}
    for seed in (42, 43, 44):
        base = by[("standard", seed)].metrics["ard"]
        want[f"problem.seed={seed}"] = [(by[(t, seed)].metrics["ard"] - base) / base * 100 for t in ("5", "10")]
    assert drawn.keys() == want.keys()
    for seed, ys in want.items():
        assert drawn[seed] == pytest.approx(ys)
    mean = next(ln for ln in ax.get_lines() if ln.get_gid() == "mean")
    assert list(mean.get_ydata()) == pytest.approx([statistics.fmean(y[i] for y in want.values()) for i in (0, 1)])
    # one seed: nothing to pair, the plot shows the values themselves (mean ± std) as before
    one = grouping.summarize(
        [
            r
            for r in queries.sweep_runs(MlflowClient(store), MlflowClient(store).get_run(cmp.parent_id))
            if r.data.params["problem.seed"] == "42"
        ],
        study="tiled_w1",
        baseline={"variant.name": "standard", "variant.tile_size": 0},
        relative={"ard": "percent"},
    )
    assert not one.paired
    solo = tiled_figure(one)
    assert next(a for a in solo.axes if a.get_title().startswith("ARD")).get_ylabel() == "ARD (floats)"


def _ends(spec: str) -> list[str]:
    """The first and last value of a sweeper param: 'a,b,c', 'range(5)', Optuna's 'choice(..)', 'interval(..)'."""
    inner = re.sub(r"^tag\([^,]*,\s*(.*)\)$", r"\1", spec.strip())
    if m := re.fullmatch(r"range\((\d+)\)", inner):
        return ["0", str(int(m.group(1)) - 1)]
    if m := re.fullmatch(r"(?:choice|interval)\((.*)\)", inner):
        inner = m.group(1)
    values = [v.strip() for v in inner.split(",")]
    return [values[0], values[-1]]


# a problem's settings for a small, quick job (the sparse problems': fewer samples)
GPU = __import__("torch").cuda.is_available()
SHRUNK = {"chars": ["problem.block_size=8", "problem.val_chars=64"]}


# char_challenge's board is checked at 80 columns by a real round (test_char_challenge.py)
@pytest.mark.parametrize("preset", [p for p in PRESETS if p != "char_challenge"])
def test_every_presets_terminal_table_fits_120_columns(preset, sweep_store, tmp_path, capsys, monkeypatch):
    # a small real sweep of the preset: its grid's first and its last point, over its first and last seed, each job
    # shrunk (fewer samples and epochs); the table's keys and key metrics are the preset's own
    store = sweep_store[0]
    params = compose(f"sweeps={preset}", hydra_section=True).hydra.sweeper.params
    seeds = dict.fromkeys(_ends(params.get("problem.seed", "42")))  # one seed where the preset names one
    points = [[f"{k}={_ends(v)[i]}" for k, v in params.items() if k != "problem.seed"] for i in (0, 1)]
    rec = Recorder(store, f"width_{preset}")
    parent = rec.start_parent(f"sweep sweeps={preset}", {"sweep.overrides": f"sweeps={preset}"})
    results = []
    for point in points:
        for seed in seeds:
            overrides = [f"sweeps={preset}", *point, f"problem.seed={seed}"]
            composed = compose(*overrides)
            overrides += SHRUNK.get(composed.problem.name, ["problem.n_train=40", "problem.n_test=20"])
            if "max_epochs" in composed.method:
                overrides.append("method.max_epochs=2")
            if "max_steps" in composed.method:  # the character models
                overrides += ["method.max_steps=2", "method.eval_interval=2"]
            if composed.method.get("n_layer", 0) > 4:  # proxy_study's 32-layer gpt: its traces took 14 s a job
                overrides.append("method.n_layer=4")
            if composed.device.name == "cuda" and "device" not in params and not GPU:
                overrides.append("device=torch_cpu")  # a preset all on the GPU (energy_joules): its table here
            cfg = compose(*overrides)
            try:
                results.append(job.run(cfg))
            except Exception as e:  # a cuda arm on a machine without a GPU: a FAILED run, as the launcher records
                results.append(failed_result(cfg, e))
            rec.log(results[-1], parent_run_id=parent)
    rec.end_parent(parent, "FINISHED", results)
    monkeypatch.setenv("COLUMNS", "120")
    args = [preset, "--tracking-uri", store, "--out", str(tmp_path / "o"), "--no-log", "--no-plot"]
    lines = _printed(args, capsys)
    table = lines[: lines.index(next(ln for ln in lines if ln.startswith("wrote")))]
    assert max(len(ln) for ln in table) <= 120, "\n".join(table)
    cmp, _ = cmpmod.compare(preset, store, tmp_path / "o", log=False, plot=False)
    if isinstance(cmp, Leaderboard):  # a challenge: its columns are the leaderboard's figures, not key metrics
        assert cmp.figures()[:2] == ["accuracy", "dmd"]
        return
    key = study.key_metrics(study.study_settings(preset))
    shown = [c.split(" ")[0] for c in cmp.terminal_columns()]
    assert shown and set(shown) <= set(key), (shown, key)


def _curves_comparison(n: int, alike: int):
    """n arms of a study with per-epoch curves, the first `alike` of them with the very same curves."""
    from sweep.report.table import Comparison, Row, Stat

    rows = []
    for i in range(n):
        shift = 0 if i < alike else i
        curve = ([0.5 + 0.01 * (e + shift) for e in range(10)], [0.01] * 10)
        row = Row({"variant.name": f"v{i}"}, 3, 3, {"accuracy": Stat(1.0, 0.0, 3)})
        row.curves = {"test_accuracy": curve, "train_loss": curve}
        rows.append(row)
    return Comparison("many", "p", "many", ["variant.name"], ["accuracy"], rows)


def test_curves_with_many_arms_stay_readable(tmp_path):
    """26 arms (13 of them learning alike, as tiled_w1's): the arms whose curves coincide are one line, no two
    lines share a colour and marker, and the legend sits beside the panels, covering none."""
    from sweep.report.curves import curves_figure, plot_curves

    fig = curves_figure(_curves_comparison(26, alike=13))
    ax = fig.axes[-1]
    labels = ax.get_legend_handles_labels()[1]
    assert len(labels) == 14 and labels[0] == "v0 and 12 more alike"
    looks = {(ln.get_color(), ln.get_marker()) for ln in ax.get_lines() if not ln.get_label().startswith("_")}
    assert len(looks) == 14
    fig.canvas.draw()
    box = ax.get_legend().get_window_extent()
    assert not any(box.overlaps(a.get_window_extent()) for a in fig.axes)
    assert plot_curves(_curves_comparison(26, alike=13), tmp_path / "c.png").stat().st_size > 10_000


def test_the_char_models_curves_say_their_units_and_the_wall_clock_panel_colours_no_front(tmp_path, monkeypatch):
    """char_lm's curves drew the training loss in nats beside the validation loss in bits, unlabelled (a false
    gap), and said "train dashed" with no train curve; its wall-clock panel coloured the accuracy-energy front."""
    import math

    from sweep.report.curves import curves_figure
    from sweep.report.pareto import front, plot_front
    from sweep.report.table import Comparison, Row, Stat

    rows = []
    for i, (acc, pj, s) in enumerate(((0.3, 1e6, 0.1), (0.5, 1e8, 9.0), (0.4, 1e9, 0.5))):
        row = Row({"arm": f"m{i}"}, 3, 3, {"accuracy": Stat(acc, 0, 3), "energy_pj": Stat(pj, 0, 3),
                                           "wall_clock_s": Stat(s, 0, 3)})  # fmt: skip
        nats = [3.0, 2.0]
        bits = [n / math.log(2) for n in nats]
        row.curves = {"test_accuracy": ([0.2, acc], [0, 0]), "train_loss": (nats, [0, 0]),
                      "test_loss": (bits, [0, 0]), "eval_step": ([100, 200], [0, 0])}  # fmt: skip
        rows.append(row)
    cmp = Comparison("char_lm", "p", "char_lm", ["arm"], ["accuracy", "energy_pj", "wall_clock_s"], rows)
    fig = curves_figure(cmp)
    labels = [ax.get_ylabel() for ax in fig.axes[:3]]
    assert labels == [
        "validation character accuracy",
        "train loss (bits per character)",
        "validation loss (bits per character)",
    ]
    train, test = (ax.get_lines()[0].get_ydata() for ax in fig.axes[1:3])
    assert list(train) == pytest.approx(list(test))  # one scale: the same loss is the same height
    objectives = {"accuracy": "maximize", "energy_pj": "minimize"}
    cmp.front = front(cmp, objectives)
    drawn = []
    monkeypatch.setattr("sweep.report.pareto.save", lambda fig, path: drawn.append(fig) or path)
    plot_front(cmp, cmp.front, objectives, tmp_path / "f.png", ["wall_clock_s"])
    energy, clock = drawn[0].axes[:2]
    assert "Pareto front" in energy.get_legend_handles_labels()[1]
    assert "Pareto front" not in clock.get_legend_handles_labels()[1] and "named" in clock.get_title()
    # the same accuracy as the curves' (validation characters): the front plot called it "test accuracy"
    assert energy.get_ylabel() == clock.get_ylabel() == "validation character accuracy (maximize)"


def test_an_integer_key_is_ticked_at_its_values():
    """sign_vs_sgd's k = 3, 4, 5: no tick at 3.5 or 4.5."""
    from sweep.report.plots import default_figure
    from sweep.report.table import Comparison, Row, Stat

    rows = [
        Row({"method.name": m, "problem.k_sparse": k}, 3, 3, {"epochs": Stat(10.0 * int(k), 1.0, 3)})
        for m in ("sgd", "sign_sgd")
        for k in ("3", "4", "5")
    ]
    fig = default_figure(Comparison("k", "p", "k", ["method.name", "problem.k_sparse"], ["epochs"], rows))
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["3", "4", "5"]


def test_batched_wall_clock_is_marked_and_an_unconverged_arm_gets_no_speed_up(store, tmp_path):
    """A batched run's wall-clock is its batch's share (marked, with a note); an arm that stopped at its epoch cap
    short of its target is marked, not given a speed-up (weight_decay's wd=0 was "0.412x")."""
    args = ["method=sgd", "problem.n_bits=10", "tracker=none", "method.max_epochs=1,100", "problem.seed=1,2"]
    p = run_sweep("-m", *args, "hydra.launcher.batch=4", "mlflow.experiment=capped", cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    client = MlflowClient(store)
    runs = queries.sweep_runs(client, queries.find_parent(client, "capped"))
    cmp = grouping.summarize(runs, baseline={"method.max_epochs": 100}, relative={"epochs": "speedup"})
    capped = next(r for r in cmp.rows if r.key["method.max_epochs"] == "1")
    assert capped.batched and capped.converged is False
    assert capped.relative["epochs speed-up"] == "not converged (0/2)"
    md = cmp.markdown()
    assert "(b)" in cmp.cells(capped)[cmp.header().index("wall_clock_s")]
    # the note said "each batch's share a run" (a prober's round of issue 43: read as garbled)
    assert "(b): runs solved together in batches: wall_clock_s and cost_usd are each run's share of its batch" in md
    # a terminal table without those columns has no mark, and so no note (tiled_w1's said it under ard and energy)
    assert cmp.notes(["epochs"]) == [] and cmp.notes(["epochs", "cost_usd"]) == cmp.notes()[:1]


def test_a_row_of_batched_and_solo_runs_is_marked_as_mixed_not_as_batched():
    """`sweep -m method=sgd 'problem.seed=range(42,58)' hydra.launcher.batch=16` after the README's single run of
    seed 42: 15 batch shares and one whole solve in one row, marked "(b)" as if each were its batch's share."""
    from types import SimpleNamespace

    from sweep.report.table import MIXED_NOTE

    def run(seed: int, batched: bool) -> SimpleNamespace:
        metrics = {"wall_clock_s": 0.1, "cost_usd": 1e-6, **({grouping.BATCH_SHARE: 1.6} if batched else {})}
        data = SimpleNamespace(params={"method.name": "sgd", "problem.seed": str(seed)}, metrics=metrics, tags={})
        info = SimpleNamespace(status="FINISHED", run_id=f"r{seed}", start_time=seed, end_time=seed + 1)
        return SimpleNamespace(info=info, data=data)

    mixed = grouping.summarize([run(42, False), *(run(s, True) for s in range(43, 58))], metrics=["wall_clock_s"])
    row = mixed.rows[0]
    assert (row.finished, row.batched) == (16, 15)
    assert mixed.cells(row)[-1].endswith("(b some)") and mixed.notes() == [MIXED_NOTE], mixed.notes()
    whole = grouping.summarize([run(s, True) for s in range(43, 58)], metrics=["wall_clock_s"])
    assert whole.cells(whole.rows[0])[-1].endswith(" (b)") and "(b some)" not in whole.markdown()


def test_a_compare_override_given_to_the_sweep_is_the_one_its_hint_shows(tmp_path, capsys):
    """Issue 43: `compare.metrics=[...]` on a sweep's command was accepted and ignored: the printed
    `sweep-compare` read the preset's file. An override shapes its run in Hydra, so the sweep records its compare
    settings on its parent (sweep.compare) and the hint's command, or a later one by run id, shows them."""
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    args = ("-m", "mlflow.experiment=metrics", "method=gf2,km", "problem.n_bits=10", "compare.metrics=[ard,epochs]")
    p = run_sweep(*args, f"mlflow.tracking_uri={store}", cwd=tmp_path, env={"SWEEP_SPOOL_DIR": str(tmp_path / "spool")})
    assert p.returncode == 0, p.stderr
    assert cmpmod.main(["metrics", "--no-plot", "--no-log", "--tracking-uri", store, "--out", str(tmp_path / "o")]) == 0
    header = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("name "))
    assert header.split() == ["name", "ard", "epochs"], header  # the default's accuracy and wall_clock_s not shown


def test_a_sweep_whose_every_run_failed_is_a_whole_title_and_no_progress_bars(tmp_path):
    """A fresh prober's round of issue 43: a sweep whose every run failed left the table a lone `runs` column, and
    its title wrapped to that column's width ("allf" / "ail "); reading each failure's traceback artifact drew
    MLflow's progress bar on stderr ("Downloading artifacts: 100%|...") once a run."""
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    rec = Recorder(store, "allfail")
    parent = rec.start_parent("sweep", {"sweep.overrides": "problem.seed=1,2"})
    failed = [failed_result(compose("method=gf2", f"problem.seed={s}", *SMALL), RuntimeError("boom")) for s in (1, 2)]
    for r in failed:
        rec.log(r, parent_run_id=parent)
    rec.end_parent(parent, "FAILED", failed)
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "sweep.compare",
            "allfail",
            "--tracking-uri",
            store,
            "--out",
            str(tmp_path),
            "--no-plot",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = p.stdout.splitlines()
    assert p.returncode == 0 and lines[1].strip() == "allfail", (lines, p.stderr)
    assert [ln.split() for ln in lines[2:4]] == [["method"], ["name", "runs"]] and lines[5].split() == ["gf2", "0/2"]
    assert any("boom" in ln for ln in lines)
    assert "Downloading artifacts" not in p.stderr, p.stderr


def test_an_arm_at_chance_against_a_base_that_half_converged_gets_no_speed_up():
    """lr_width: lr 0.5 (0 of 2 seeds at the target) against lr 0.1 (1 of 2) was given "0.56x", a ratio of epoch
    caps; only rows where no run of either reached a target are compared as they are (a fixed-work study)."""
    from sweep.report.grouping import speedup_cell
    from sweep.report.table import Row

    def row(reached: int | None, finished: int = 2) -> Row:
        return Row({}, finished, finished, reached=reached)

    assert speedup_cell(28.0, 50.0, row(0), row(1)) == "not converged (0/2)"
    assert speedup_cell(28.0, 50.0, row(1), row(1)) == "not converged (1/2)"
    assert speedup_cell(50.0, 50.0, row(0), row(0)) == "1x"  # both capped alike: compared as they are
    assert speedup_cell(50.0, 10.0, row(2), row(1)) == ">= 5x"
    assert speedup_cell(20.0, 10.0, row(2), row(2)) == "2x"
    assert speedup_cell(20.0, 10.0, row(None), row(None)) == "2x"  # no target (the exact methods)


def test_a_run_deleted_in_mlflow_is_said_not_counted(sweep_store, tmp_path):
    """A prober's round: with one job's run deleted in MLflow's UI, the table showed the rest as the whole sweep
    (its swept column could even vanish), without a word."""
    store = sweep_store[0]
    rec, parent, results = record_small_sweep(store, "deleted_demo", "deleted_demo", *SMALL)
    rec.end_parent(parent, "FINISHED", results)
    client = MlflowClient(store)
    victim = queries.load_children(client, client.get_run(parent))[0].info.run_id
    cmp, _ = cmpmod.compare(parent, store, tmp_path / "before", log=False, plot=False)
    assert cmp.deleted == 0 and not any("deleted" in n for n in cmp.notes())
    client.delete_run(victim)
    cmp, _ = cmpmod.compare(parent, store, tmp_path / "after", log=False, plot=False)
    assert sum(r.total for r in cmp.rows) == 3
    said = "1 run(s) of this sweep deleted in MLflow are not counted (restore them in its UI, or `mlflow runs restore`"
    assert any(n.startswith(said) for n in cmp.notes()) and said in cmp.markdown()


def test_a_sweep_of_seeds_alone_names_its_row_by_its_method(sweep_store, tmp_path):
    store, parent, _ = sweep_store
    runs = [
        r
        for r in MlflowClient(store).search_runs(
            [MlflowClient(store).get_run(parent).info.experiment_id], f"tags.mlflow.parentRunId = '{parent}'"
        )
        if r.data.params.get("method.name") == "km"
    ]
    assert len(runs) == 2 and grouping.swept_keys([dict(r.data.params) for r in runs]) == []  # seeds alone
    cmp = grouping.summarize(runs, "demo", parent, "demo")
    # the row is km's, in the table and in every plot's label: was no key column, and "all" in the plots
    assert cmp.keys == ["method.name"] and [r.key for r in cmp.rows] == [{"method.name": "km"}]
    assert cmp.rows[0].finished == 2 and "km" in cmp.markdown()


def test_a_device_the_sweep_did_not_vary_is_named_as_its_runs_ran(store, tmp_path, monkeypatch):
    """`sweep sweeps=gpu_vs_cpu device=torch_cpu` (no GPU here): its wall-clock bars were labelled "cpu", the
    plot's default for a device the sweep did not vary; they are labelled by the runs' own device."""
    from sweep.report import plots

    rec, parent, _ = record_small_sweep(store, "torch_only", "gpu_vs_cpu", *SMALL, "device=torch_cpu")
    rec.end_parent(parent, "FINISHED", [])
    runs = rec.client.search_runs([rec.experiment_id], f"tags.mlflow.parentRunId = '{parent}'")
    cmp = grouping.summarize(runs, "gpu_vs_cpu", parent, "torch_only")
    assert cmp.keys == ["method.name"] and cmp.common["device.name"] == "torch_cpu"
    drawn = []
    monkeypatch.setattr(plots, "save", lambda fig, path: drawn.append(fig) or path)
    plots.plot_devices(cmp, tmp_path / "devices.png")
    legend = drawn[0].axes[0].get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["torch_cpu"]  # was "cpu"


def test_the_gpu_cpu_ratio_is_drawn_against_torch_cpu_where_the_sweep_has_no_numpy_cpu(tmp_path, monkeypatch):
    """`sweeps=gpu_vs_cpu device=torch_cpu,cuda` (the same torch code on each): the ratio panel knew only a device
    named `cpu` and said "no GPU/CPU ratio: no finished cuda runs" beside the cuda bars."""
    from sweep.report import plots
    from sweep.report.table import Comparison, Row, Stat

    def row(device: str, seconds: float) -> Row:
        key = {"device.name": device, "method.name": "sgd"}
        return Row(key, 3, 3, {"wall_clock_s": Stat(seconds, 0.0, 3)})

    rows = [row("torch_cpu", 0.5), row("cuda", 0.1)]
    cmp = Comparison("gpu_vs_cpu", "p", "gpu_vs_cpu", ["device.name", "method.name"], ["wall_clock_s"], rows)
    drawn = []
    monkeypatch.setattr(plots, "save", lambda fig, path: drawn.append(fig) or path)
    plots.plot_devices(cmp, tmp_path / "devices.png")
    ratio = drawn[0].axes[1]
    assert [round(b.get_height(), 6) for b in ratio.patches] == [0.2], [t.get_text() for t in ratio.texts]
    assert ratio.get_ylabel() == "cuda / torch_cpu wall-clock"


def test_each_entrant_is_judged_at_its_own_rounds_time_limit():
    """A newcomer's round at time_limit_s=5 after the group's at 60: an entrant whose latest round was the 60 s one
    (10 s a run) was judged against 5 s ("time: ... ran past 5 s"), and the header named 5 s for every entrant."""
    from types import SimpleNamespace

    from sweep.record.tags import SCORER_TAG
    from sweep.report.leaderboard import LIMIT_PARAM, PATH, SEED, leaderboard

    def run(path: str, wall: float) -> SimpleNamespace:
        metrics = {"accuracy": 1.0, "dmd": 100.0, "wall_clock_s": wall}
        data = SimpleNamespace(params={PATH: path, SEED: "1"}, metrics=metrics, tags={SCORER_TAG: "s"})
        return SimpleNamespace(info=SimpleNamespace(status="FINISHED", run_id="r"), data=data)

    def parent(limit: str) -> SimpleNamespace:
        return SimpleNamespace(
            info=SimpleNamespace(run_id=f"p{limit}"), data=SimpleNamespace(params={LIMIT_PARAM: limit})
        )

    rounds = [(parent("5"), [run("fast.py:solve", 1.0)]), (parent("60"), [run("slow.py:solve", 10.0)])]
    board = leaderboard(rounds, {"accuracy": 0.95}, lambda r: "", "parity_challenge", "e")
    assert [e.path for e in board.passed] == ["fast.py:solve", "slow.py:solve"] and not board.out, board.out
    assert "within its round's time limit a run (5, 60 s)" in board.header()
    late = leaderboard([(parent("5"), [run("slow.py:solve", 10.0)])], {"accuracy": 0.95}, lambda r: "", "p", "e")
    assert late.out[0].reasons == ["time: 1 of 1 seeds ran past 5 s"] and "within 5 s a run" in late.header()
