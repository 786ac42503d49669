"""A job is named by the overrides that vary within its multirun (the launcher's naming.py)."""

from __future__ import annotations

from hydra_plugins.sweep_launcher.naming import Namer


def test_names_keep_only_what_varies_and_stay_unique():
    jobs = [
        ["variant=tiled", f"variant.tile_size={t}", f"method.hidden={h}", "problem.n_bits=20", f"problem.seed={s}"]
        for t in (50, 100)
        for h in (1000, 500)
        for s in (42, 44)
    ]
    names = Namer().names(jobs, range(len(jobs)))
    assert names[0] == "tile_size=50 hidden=1000 seed=42"
    assert len(set(names)) == len(jobs)


def test_add_prefix_absent_keys_one_job_and_duplicates():
    namer = Namer()
    names = namer.names([["+arm=t50", "problem.seed=1"], ["problem.seed=1"]], [0, 1])
    assert names == ["arm=t50", "problem.seed=1"]  # the job without the key: all its overrides
    assert Namer().names([["method=gf2", "problem.n_bits=12"]], [0]) == ["method=gf2 problem.n_bits=12"]
    assert Namer().names([[]], [7]) == ["#7"]
    assert Namer().names([["a=1"], ["a=1"]], [0, 1]) == ["a=1", "a=1 #1"]


def test_a_later_batch_names_keys_that_varied_in_earlier_ones():
    namer = Namer()
    assert namer.names([["lr=0.1", "seed=1"], ["lr=0.2", "seed=1"]], [0, 1]) == ["lr=0.1", "lr=0.2"]
    assert namer.names([["lr=0.3", "seed=2"]], [2]) == ["lr=0.3 seed=2"]


def test_keys_the_sweep_sweeps_name_even_a_first_batch_where_they_do_not_vary_yet():
    from omegaconf import OmegaConf

    from hydra_plugins.sweep_launcher.naming import sweep_overrides, swept_keys

    hydra = OmegaConf.create(
        {
            "overrides": {"task": ["problem.seed=1,2", "method=gf2"]},
            "sweeper": {"params": {"+sweeps/arm": "a,b", "lr": "interval(0.1, 1)"}},
        }
    )
    assert swept_keys(sweep_overrides(hydra)) == {"problem.seed", "sweeps/arm", "lr"}
    names = Namer.for_multirun(hydra).names([["problem.seed=1", "method=gf2", "+sweeps/arm=a", "lr=0.5"]], [0])
    assert names == ["seed=1 a lr=0.5"]


def test_names_are_short_and_clear_where_a_chart_cuts_them():
    """tiled_w1's names began with the same 38 characters (`method.hidden=500 sweeps/tiled_w1_arm=`), all a
    chart's label showed: a key by its last part, an arm by its name; a last part two keys share stays whole."""
    jobs = [
        [f"method.hidden={h}", f"+sweeps/tiled_w1_arm={a}", f"problem.seed={s}"]
        for h in (500, 1000)
        for a in ("t50", "w2_t100")
        for s in (42, 43)
    ]
    assert Namer().names(jobs, range(8))[:4] == [
        "hidden=500 t50 seed=42",
        "hidden=500 t50 seed=43",
        "hidden=500 w2_t100 seed=42",
        "hidden=500 w2_t100 seed=43",
    ]
    both = Namer().names([["method.lr=0.1", "optim.lr=1"], ["method.lr=0.2", "optim.lr=2"]], [0, 1])
    assert both == ["method.lr=0.1 optim.lr=1", "method.lr=0.2 optim.lr=2"]


def test_a_name_shows_a_value_as_typed_without_hydras_escapes():
    """Issue 43: Hydra's sweeper escapes `:`, `,`, `=`, spaces and brackets in a job's overrides, and the names
    (console lines, run names, the refusal's `config error in job ...`) showed `path=x.py\\:solve`."""
    jobs = [["method.path=a.py\\:solve", "tag=x\\ y\\,z"], ["method.path=b.py\\:solve", "tag=\\[1\\]\\\\"]]
    assert Namer().names(jobs, [0, 1]) == ["path=a.py:solve tag=x y,z", "path=b.py:solve tag=[1]\\"]
