"""Every ``skdbal`` subcommand answers bad input in one line, in its own words (issue 52).

Each case runs in-process (``skdbal.cli.main``) in an empty working folder, and must end with exit
status 2, nothing on stdout, exactly one line on stderr that starts ``skdbal <command>: error:``
and names no Python parameter, and nothing written: no store, no output folder, no change to
the data it was given.
"""
import importlib.util
import os
import re

import numpy as np
import pytest

from skdbal.cli import main

PIL = pytest.importorskip("PIL.Image")

#: Python parameters that a command's message must not name (it names the flags).
PARAMETERS = ("batch_size", "id_column", "columns=", "drop_columns", "second_look_budget", "retrain_after",
              "image_size", "torch_threads", "n_instances", "n_queries", "n_jobs", "noise_rates", "last_layer",
              "allow_pickle", "token_env", "token_file", "key_field", "backend_port", "initial_sets")
LS_SDK = importlib.util.find_spec("label_studio_sdk") is not None
LS = ["--url", "http://127.0.0.1:9", "--project", "1"]   # port 9 (discard): nothing listens there


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    (root / "empty").mkdir()
    (root / "one").mkdir()
    PIL.new("L", (8, 8), 0).save(root / "one" / "a.png")
    (root / "two").mkdir()
    for i in range(2):
        PIL.new("L", (8, 8), 200 * i).save(root / "two" / f"{i}.png")
    (root / "text.csv").write_text("name,colour,size,weight\nrose,red,1,5\ntulip,yellow,2,6\nlily,white,3,7\n")
    (root / "gaps.csv").write_text("a,b\n1,\n2,3\n3,4\n")
    (root / "notes.txt").write_text("not a pool")
    (root / "garbage.npy").write_bytes(b"not an array")
    np.save(root / "rows.npy", np.arange(24, dtype=np.float32).reshape(12, 2))
    (root / "notastore.db").write_text("not a store")
    (root / "grid").mkdir()
    (root / "token").write_text("a-token")
    os.chmod(root / "token", 0o644)           # others may read it: refused
    return root


# (arguments, a piece of the message); DATA is the data folder; --set cases may name preset fields
CASES = [
    # quickstart (the default)
    (["quickstart", "--strategies", "bald,foo"], "--strategies: unknown 'foo'; choose from"),
    (["quickstart", "--strategies", "bald,bald"], "--strategies repeats bald"),
    (["quickstart", "--bogus"], "unrecognized argument --bogus"),
    (["--n-queris", "3"], "skdbal quickstart: error: unrecognized argument --n-queris (did you mean --n-queries?)"),
    (["quickstart", "--n-queries", "x"], "argument --n-queries: 'x' is not a whole number"),
    (["quickstart", "--n-queries"], "argument --n-queries: expected one argument"),
    (["quickstart", "--seeds"], "argument --seeds: expected at least one argument"),
    (["quickstart", "--n-instances", "-1"], "argument --n-instances: must be at least 1; got -1"),
    (["quickstart", "--n-jobs", "0"], "argument --n-jobs: 0 runs nothing"),
    (["quickstart", "--device", "tpu"], "--device must be 'auto', 'cpu', 'cuda' or another torch device; got 'tpu'"),
    (["quickstart", "stray"], "unrecognized argument stray"),
    (["quickstar"], "skdbal: error: unknown command 'quickstar' (did you mean quickstart?)"),
    # experiment
    (["experiment"], "the following arguments are required: --out"),
    (["experiment", "--out", "g", "--strats", "bald"], "unrecognized argument --strats (did you mean --strategies?)"),
    (["experiment", "--out", "g", "--strategies", "bald,foo"], "--strategies: unknown strategy 'foo'"),
    (["experiment", "--out", "g", "--strategies", ","], "--strategies names no strategy"),
    (["experiment", "--out", "g", "--seeds", "x"], "argument --seeds: invalid int value: 'x'"),
    (["experiment", "--out", "g", "--noise-rates", "1.5"], "argument --noise-rates: a noise rate lies in [0, 1)"),
    (["experiment", "--out", "g", "--noise-rates", "nan"], "argument --noise-rates: a noise rate lies in [0, 1); "
                                                           "got nan"),
    (["experiment", "--out", "g", "--noise-rates", "x"], "argument --noise-rates: 'x' is not a number"),
    (["experiment", "--out", "g", "--set", "foo=1"], "--set: unknown preset field(s) ['foo']"),
    (["experiment", "--out", "g", "--set", "n_queries=x"], "--set: n_queries must be an int; got 'x'"),
    (["experiment", "--out", "g", "--set", "oops"], "--set expects key=value; got 'oops'"),
    (["experiment", "--out", "g", "--preset", "nope"], "unknown preset 'nope'"),
    (["experiment", "--out", "g", "--initial-sets", "nope"], "argument --initial-sets: invalid choice: 'nope'"),
    (["experiment", "--out", "g", "--ensemble", "-1"], "argument --ensemble: must be at least 0"),
    (["experiment", "--out", "g", "--n-jobs", "0"], "argument --n-jobs: 0 runs nothing"),
    (["experiment", "--out", "g", "--torch-threads", "0"], "argument --torch-threads: must be at least 1"),
    (["experiment", "--out", "g", "--last-layer", "foo"], "unknown --last-layer ['foo']"),
    (["experiment", "--out", "g", "--device", "tpu"], "--device must be"),
    (["experiment", "--out", "g", "--representation", "simclr"],
     "--representation: unknown representation 'simclr'; choose from 'none', 'pool', 'pca' or 'file:PATH'"),
    (["experiment", "--out", "g", "--representation", "file:DATA/missing.npy"],
     "--representation: representation 'file:DATA/missing.npy': DATA/missing.npy is not a file"),
    (["experiment", "--out", "g", "--representation", "file:DATA/notes.txt"], "give a .npy file of embeddings"),
    (["experiment", "--out", "g", "--head", "svm"], "argument --head: invalid choice: 'svm'"),
    (["experiment", "--out", "g", "--head", "bll"], "--head bll is the model over a representation's embeddings; "
                                                     "give --representation too"),
    (["experiment", "--out", "g", "--encoder-epochs", "0"], "argument --encoder-epochs: must be a number above 0"),
    (["experiment", "--out", "g", "--encoder-epochs", "inf"], "argument --encoder-epochs: must be a number above 0; "
                                                              "got inf"),
    (["quickstart", "--n-instances", "0"], "argument --n-instances: must be at least 1; got 0"),
    (["quickstart", "--n-queries", "2.5"], "argument --n-queries: '2.5' is not a whole number"),
    (["experiment", "--out", "g", "--representation", "pool", "--laplace"], "cannot be combined with it"),
    # report
    (["report"], "the following arguments are required: out"),
    (["report", "nope"], "nope holds no grid"),
    (["report", "DATA/grid", "--bogus"], "unrecognized argument --bogus"),
    (["report", "DATA/grid", "--clean", "nope"], "holds no grid"),
    # label
    (["label"], "one of the arguments --demo --images --table --npy is required"),
    (["label", "--demo", "digits", "--bogus"], "skdbal label: error: unrecognized argument --bogus"),
    (["label", "--demo", "digits", "--bach-size", "5"],
     "unrecognized argument --bach-size (did you mean --batch-size?)"),
    (["label", "--imgs", "one", "--classes", "a,b"], "unrecognized argument --imgs (did you mean --images?)"),
    (["label", "--demo", "nope"], "argument --demo: invalid choice: 'nope'"),
    (["label", "--images"], "argument --images: expected one argument"),
    (["label", "--images", "DATA/none", "--classes", "a,b"], "--images DATA/none: no such folder"),
    (["label", "--images", "DATA/notes.txt", "--classes", "a,b"], "--images DATA/notes.txt: not a folder"),
    (["label", "--images", "DATA/empty", "--classes", "a,b"], "no images in"),
    (["label", "--images", "DATA/one", "--classes", "a,b"],
     "the folder DATA/one holds 1 image, too few to label: the model chooses among what the first batch "
     "(--batch-size 10) leaves, so it needs at least 11 images"),
    (["label", "--images", "DATA/two", "--classes", "a,b", "--batch-size", "2"],
     "the folder DATA/two holds 2 images, too few for --batch-size 2: the first batch would leave the model "
     "nothing to choose; it needs at least 3 images, or give --batch-size 1 or less"),
    (["label", "--images", "DATA/two"], "--classes is required with --images, --table and --npy"),
    (["label", "--images", "DATA/two", "--classes", "a", "--batch-size", "1"],
     "--classes must name at least two classes"),
    (["label", "--images", "DATA/two", "--classes", "a,b,a", "--batch-size", "1"], "--classes names a more than once"),
    (["label", "--images", "DATA/two", "--classes", "a,b", "--columns", "x"],
     "--columns chooses a table's columns: it goes with --table"),
    (["label", "--table", "DATA/text.csv", "--classes", "a,b"],
     "--table DATA/text.csv: the columns name, colour are not numbers, and the model's features must be; name "
     "the item names' column with --id-column, leave them out with --drop-columns name,colour, or choose the "
     "features with --columns"),
    (["label", "--table", "DATA/text.csv", "--id-column", "name", "--classes", "a,b"],
     "the columns colour are not numbers, and the model's features must be; leave them out with "
     "--drop-columns colour"),
    (["label", "--table", "DATA/text.csv", "--columns", "size,height", "--classes", "a,b"],
     "--table DATA/text.csv has no column height; its columns are name, colour, size, weight"),
    (["label", "--table", "DATA/text.csv", "--drop-columns", "name,shade", "--classes", "a,b"],
     "has no column shade"),
    (["label", "--table", "DATA/text.csv", "--columns", "size", "--drop-columns", "name", "--classes", "a,b"],
     "argument --drop-columns: not allowed with argument --columns"),
    (["label", "--table", "DATA/text.csv", "--columns", "size,,weight", "--classes", "a,b"],
     "argument --columns: an empty column name"),
    (["label", "--table", "DATA/text.csv", "--id-column", "nope", "--classes", "a,b"],
     "--id-column nope: --table DATA/text.csv has no such column"),
    (["label", "--table", "DATA/gaps.csv", "--classes", "a,b"], "the columns b have missing values"),
    (["label", "--table", "DATA/missing.csv", "--classes", "a,b"], "--table DATA/missing.csv: no such file"),
    (["label", "--table", "DATA/notes.txt", "--classes", "a,b"], "--table reads .csv or .parquet files"),
    (["label", "--npy", "DATA/garbage.npy", "--classes", "a,b"], "cannot read 'garbage.npy' as a numeric array"),
    (["label", "--npy", "DATA/rows.npy", "--classes", "a,b", "--batch-size", "12"],
     "the array DATA/rows.npy holds 12 items, too few for --batch-size 12"),
    (["label", "--demo", "digits", "--batch-size", "x"], "argument --batch-size: 'x' is not a whole number"),
    (["label", "--demo", "digits", "--batch-size", "0"], "argument --batch-size: must be at least 1; got 0"),
    (["label", "--demo", "digits", "--batch-size"], "argument --batch-size: expected one argument"),
    (["label", "--demo", "digits", "--batch-size", "5000"],
     "the digits demo holds 1297 items, too few for --batch-size 5000"),
    (["label", "--demo", "digits", "--port", "-1"], "argument --port: a port lies in 0..65535; got -1"),
    (["label", "--demo", "digits", "--port", "x"], "argument --port: 'x' is not a port number"),
    (["label", "--demo", "digits", "--second-looks", "2"], "argument --second-looks: a threshold must lie in (0, 1)"),
    (["label", "--demo", "digits", "--second-look-budget", "2"], "argument --second-look-budget: a share lies in"),
    (["label", "--demo", "digits", "--retrain-after", "0"], "argument --retrain-after: must be at least 1"),
    (["label", "--demo", "digits", "--keys", "a,b"], "--keys: 2 keys for 10 classes"),
    (["label", "--demo", "digits", "--annotators", ","], "argument --annotators:"),
    (["label", "--demo", "digits", "--store", "DATA/no/such/x.db"], "cannot make the store DATA/no/such/x.db"),
    (["label", "--demo", "digits", "--store", "DATA/notastore.db"], "is not a readable SQLite database"),
    (["label", "--images", "DATA", "--classes", "a,b", "--encoder-time", "0"],
     "argument --encoder-time: a number of seconds above 0; got 0"),
    (["label", "--images", "DATA", "--classes", "a,b", "--encoder", "e.pt", "--encoder-size", "0"],
     "argument --encoder-size: must be at least 1; got 0"),
    # labelstudio
    (["labelstudio"], "the following arguments are required: --url"),
    (["labelstudio", "--demo", "digits", "--bogus"], "skdbal labelstudio: error: unrecognized argument --bogus"),
    (["labelstudio", "--demo", "digits"] + LS + ["--token-env", "SKDBAL_TEST_UNSET"],
     "the environment variable SKDBAL_TEST_UNSET (--token-env) is not set or empty"),
    (["labelstudio", "--demo", "digits", "--url", "ftp://x", "--project", "1", "--token-env", "SKDBAL_TEST_TOKEN"],
     "--url must be an http(s) address of Label Studio"),
    (["labelstudio", "--demo", "digits"] + LS + ["--token-file", "DATA/none"],
     "cannot read the token file DATA/none (--token-file): No such file or directory"),
    (["labelstudio", "--demo", "digits"] + LS + ["--token-file", "DATA/token"], "can be read by others"),
    (["labelstudio", "--demo", "digits", "--url", "http://127.0.0.1:9", "--project", "x", "--token-env", "T"],
     "argument --project: invalid int value: 'x'"),
    (["labelstudio", "--demo", "digits"] + LS + ["--token-env", "T", "--interval", "x"],
     "argument --interval: 'x' is not a number of seconds"),
    (["labelstudio", "--demo", "digits"] + LS + ["--token-env", "T", "--interval", "0"],
     "argument --interval: a number of seconds above 0; got 0"),
    (["labelstudio", "--demo", "digits"] + LS + ["--token-env", "T", "--backend", "--backend-port", "-1"],
     "argument --backend-port: a port lies in 0..65535; got -1"),
    (["labelstudio", "--demo", "digits"] + LS + ["--token", "s3cret"], "--token is not taken"),
    (["labelstudio", "--demo", "digits"] + LS + ["--token-env", "T", "--batch-size", "x"],
     "argument --batch-size: 'x' is not a whole number"),
    pytest.param(["labelstudio", "--demo", "digits"] + LS + ["--token-env", "SKDBAL_TEST_TOKEN"],
                 "cannot reach Label Studio at http://127.0.0.1:9",
                 marks=pytest.mark.skipif(not LS_SDK, reason="the labelstudio extra is not installed")),
]


def listing(folder):
    return sorted((str(p.relative_to(folder)), p.stat().st_size if p.is_file() else None) for p in folder.rglob("*"))


@pytest.mark.parametrize("args, expected", CASES, ids=lambda v: " ".join(v)[:70] if isinstance(v, list) else "")
def test_bad_input_is_one_line_in_the_command_s_words(args, expected, data, tmp_path, monkeypatch, capsys):
    import uvicorn

    import skdbal.experiments.quickstart
    import skdbal.experiments.runner

    def started(*args, **kwargs):   # bad input is refused before a run or a server starts
        raise AssertionError("a run or a server started")

    monkeypatch.setattr(skdbal.experiments.runner, "run_grid", started)
    monkeypatch.setattr(skdbal.experiments.quickstart, "run_quickstart", started)
    monkeypatch.setattr(uvicorn.Server, "run", started)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SKDBAL_TEST_TOKEN", "not-a-real-token")
    monkeypatch.delenv("SKDBAL_TEST_UNSET", raising=False)
    before = listing(data)
    args = [a.replace("DATA", str(data)) for a in args]
    try:
        status = main(args)
    except SystemExit as exc:
        status = exc.code
    out, err = capsys.readouterr()
    assert status == 2, err
    assert out == ""
    assert err.endswith("\n") and err.count("\n") == 1, err
    command = args[0] if args[0] in ("quickstart", "experiment", "report", "label", "labelstudio") else (
        "quickstart" if args[0].startswith("-") else None)
    prefix = f"skdbal {command}: error: " if command else "skdbal: error: "
    assert err.startswith(prefix), err
    assert expected.replace("DATA", str(data)) in err
    if "--set" not in args:   # a --set message names the preset's fields, which the user types
        assert not re.search(r"\w+_\w+=", err), err
        assert not [name for name in PARAMETERS if name in err], err
    assert listing(tmp_path) == [], "a file was written"
    assert listing(data) == before, "the data was changed"


def test_a_table_s_columns_are_chosen_or_dropped(data, tmp_path):
    """``--columns`` and ``--drop-columns`` choose the features of ``skdbal label --table``."""
    from skdbal.cli import build_parser
    from skdbal.labelling.cli import make_session

    base = ["label", "--table", str(data / "text.csv"), "--id-column", "name", "--classes", "a,b",
            "--batch-size", "1"]
    for extra, features in [(["--columns", "weight,size"], ["weight", "size"]),
                            (["--drop-columns", "colour"], ["size", "weight"])]:
        args = build_parser().parse_args(base + extra + ["--store", str(tmp_path / f"{extra[0][2:]}.db")])
        session, pool, store = make_session(args)
        try:
            assert pool.columns == features and pool.keys == ["rose", "tulip", "lily"]
            assert pool.row(2) == [(c, {"size": 3.0, "weight": 7.0}[c]) for c in features]
        finally:
            session.store.close()
