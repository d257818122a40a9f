"""The papermill runner and the CLI: parameters, failures, re-use, and the bad-input sentences."""

from __future__ import annotations

import nbformat
import pytest

from ensdiv.book import cli
from ensdiv.book import run as runner
from ensdiv.errors import EnsdivError


def _notebook(path, body="x = value * 2\nprint('result', x)", params='scale = "cpu"\nvalue = 1'):
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell(params)
    cell.metadata["tags"] = ["parameters"]
    nb.cells = [nbformat.v4.new_markdown_cell("# t"), cell, nbformat.v4.new_code_cell(body)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


@pytest.fixture
def nbdir(tmp_path, monkeypatch):
    monkeypatch.setenv("ENSDIV_BUILD", str(tmp_path / "build"))
    return tmp_path


@pytest.mark.kernel
def test_runs_with_parameters_then_reuses(nbdir):
    nb = _notebook(nbdir / "a.ipynb")
    out = nbdir / "out"
    (res,) = runner.run_notebooks([nb], scale="smoke", params={"value": 21}, out_root=out)
    assert res.status == "ok" and res.seconds > 0
    executed = nbformat.read(res.output, as_version=4)
    assert "result 42" in "".join(o.get("text", "") for o in executed.cells[-1].outputs)
    (again,) = runner.run_notebooks([nb], scale="smoke", params={"value": 21}, out_root=out)
    assert again.status == "cached"
    (changed,) = runner.run_notebooks([nb], scale="smoke", params={"value": 1}, out_root=out)
    assert changed.status == "ok"


@pytest.mark.kernel
def test_failing_notebook_is_reported_and_others_run(nbdir):
    bad = _notebook(nbdir / "bad.ipynb", body="raise ValueError('broken on purpose')")
    good = _notebook(nbdir / "good.ipynb")
    results = runner.run_notebooks([bad, good], scale="smoke", out_root=nbdir / "out")
    assert [r.status for r in results] == ["failed", "ok"]
    assert "ValueError: broken on purpose" in results[0].error
    assert "cell [" in results[0].error
    assert "FAILED bad.ipynb" in runner.summary(results)


def test_undeclared_parameter_fails_before_running(nbdir):
    nb = _notebook(nbdir / "a.ipynb")
    with pytest.raises(EnsdivError, match="does not declare the parameter\\(s\\) vlaue; it declares: scale, value"):
        runner.run_notebooks([nb], scale="smoke", params={"vlaue": 3}, out_root=nbdir / "out")


def test_unknown_scale_and_missing_notebook(nbdir):
    nb = _notebook(nbdir / "a.ipynb")
    with pytest.raises(EnsdivError, match="Unknown scale 'huge'"):
        runner.run_notebooks([nb], scale="huge")
    with pytest.raises(EnsdivError, match="does not exist"):
        runner.run_notebooks([nbdir / "nope.ipynb"], scale="smoke")


def test_notebook_without_scale_parameter(nbdir):
    nb = _notebook(nbdir / "a.ipynb", params="value = 1")
    with pytest.raises(EnsdivError, match="no `scale`"):
        runner.run_notebooks([nb], scale="smoke")


def test_cli_prints_one_sentence_and_exit_codes(nbdir, capsys):
    nb = _notebook(nbdir / "a.ipynb")
    assert cli.main(["run", str(nb), "--scale", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ensdiv: Unknown scale 'nope'") and "Traceback" not in err
    assert cli.main(["run", str(nb), "--scale", "smoke", "-p", "bogus", "1"]) == 2
    assert "does not declare" in capsys.readouterr().err
    assert cli.main(["run", str(nb), "--scale", "smoke", "-p", "value", "5"]) == 0
    assert "total" in capsys.readouterr().out
    bad = _notebook(nbdir / "bad.ipynb", body="1/0")
    assert cli.main(["run", str(bad), "--scale", "smoke"]) == 1


def test_cli_param_values_are_typed():
    assert cli._params([["n", "4"], ["lr", "0.1"], ["flag", "true"], ["root", "/data/x"]]) == {
        "n": 4, "lr": 0.1, "flag": True, "root": "/data/x"}


def test_toc_lists_existing_notebooks():
    found = runner.toc_notebooks()
    assert found and all(p.suffix == ".ipynb" and p.exists() for p in found)


def test_parameters_are_read_even_with_equals_in_comments(nbdir):
    params = 'scale = "cpu"  # smoke | cpu\nn = None  # int (0 = all); None = preset\nlr: float = 0.1'
    nb = _notebook(nbdir / "c.ipynb", params=params)
    assert runner.notebook_parameters(nb) == {"scale": "cpu", "n": None, "lr": 0.1}
    (res,) = runner.run_notebooks([nb], scale="smoke", params={"n": 3}, out_root=nbdir / "out")
    assert res.status == "failed" and "value" in res.error  # the body uses `value`, which this notebook lacks


def test_repository_buttons_only_with_a_real_repository(tmp_path, monkeypatch):
    import yaml

    from ensdiv.book.site import book_config
    from ensdiv.paths import project_root

    monkeypatch.delenv("ENSDIV_REPOSITORY_URL", raising=False)
    off = yaml.safe_load(book_config(project_root() / "_config.yml", tmp_path).read_text())
    assert "repository" not in off and "launch_buttons" not in off
    assert off["html"]["use_repository_button"] is False and off["html"]["use_issues_button"] is False
    monkeypatch.setenv("ENSDIV_REPOSITORY_URL", "https://example.org/ensdiv")
    on = yaml.safe_load(book_config(project_root() / "_config.yml", tmp_path).read_text())
    assert on["repository"]["url"] == "https://example.org/ensdiv" and on["html"]["use_repository_button"] is True
    assert on["launch_buttons"]["binderhub_url"] == "https://mybinder.org"


def test_style_sheets_named_only_when_the_book_has_them(tmp_path):
    """A book without ``book/_static/ensdiv.css`` must not link it (the browser reported a 404 in CI)."""
    import shutil

    import yaml

    from ensdiv.book.site import book_config
    from ensdiv.paths import project_root

    shutil.copy(project_root() / "_config.yml", tmp_path / "_config.yml")
    bare = yaml.safe_load(book_config(tmp_path / "_config.yml", tmp_path / "out").read_text())
    assert "ensdiv.css" not in bare["sphinx"]["config"]["html_css_files"]
    assert "_ensdiv_static" in bare["sphinx"]["config"]["html_static_path"]
    (tmp_path / "book" / "_static").mkdir(parents=True)
    (tmp_path / "book" / "_static" / "ensdiv.css").write_text("main {}\n")
    styled = yaml.safe_load(book_config(tmp_path / "_config.yml", tmp_path / "out").read_text())
    assert styled["sphinx"]["config"]["html_css_files"][-1] == "ensdiv.css"


class _FlakyPapermill:
    """Stands in for papermill: the first ``fails`` calls raise ``error``, the next one succeeds."""

    def __init__(self, error, fails):
        self.error, self.fails, self.calls = error, fails, 0

    def execute_notebook(self, *args, **kwargs):
        self.calls += 1
        if self.calls <= self.fails:
            raise self.error


def test_a_kernel_that_dies_before_it_starts_is_started_again(tmp_path, monkeypatch):
    """Bad input: the kernel's port was taken by a kernel started at the same moment (CI, 28 Nov 2026:
    ``ZMQError: Address already in use``), so it dies before replying; the run starts it again."""
    monkeypatch.setattr(runner.time, "sleep", lambda s: None)
    died = RuntimeError("Kernel died before replying to kernel_info")
    pm = _FlakyPapermill(died, fails=runner.KERNEL_STARTS - 1)
    runner._start_and_run(pm, nbformat.v4.new_notebook(), tmp_path / "o.ipynb", kernel="python3", cwd=tmp_path)
    assert pm.calls == runner.KERNEL_STARTS
    # it gives up after KERNEL_STARTS tries and raises what the last one said
    pm = _FlakyPapermill(died, fails=runner.KERNEL_STARTS)
    with pytest.raises(RuntimeError, match="kernel_info"):
        runner._start_and_run(pm, nbformat.v4.new_notebook(), tmp_path / "o.ipynb", kernel="python3", cwd=tmp_path)
    assert pm.calls == runner.KERNEL_STARTS


def test_a_failure_inside_a_cell_is_not_run_again(tmp_path, monkeypatch):
    """Bad input: a cell that raises (or a kernel that dies once running) is a real failure: one call only."""
    monkeypatch.setattr(runner.time, "sleep", lambda s: None)
    for error in (ValueError("a cell raised"), RuntimeError("Kernel died")):
        pm = _FlakyPapermill(error, fails=1)
        with pytest.raises(type(error)):
            runner._start_and_run(pm, nbformat.v4.new_notebook(), tmp_path / "o.ipynb", kernel="python3",
                                  cwd=tmp_path)
        assert pm.calls == 1


def test_a_page_that_times_itself_gets_every_core_in_a_parallel_run():
    """Two pages at a time on two cores: one thread each, both for the page that runs alone to time itself;
    bad input: one core for two pages still gives each a thread, and a limit the user set is kept."""
    assert runner.thread_limits(2, alone=False, cores=2, environ={})["OMP_NUM_THREADS"] == "1"
    assert runner.thread_limits(2, alone=True, cores=2, environ={})["OMP_NUM_THREADS"] == "2"
    assert runner.thread_limits(4, alone=False, cores=16, environ={})["MKL_NUM_THREADS"] == "4"
    assert runner.thread_limits(2, alone=False, cores=1, environ={})["OMP_NUM_THREADS"] == "1"
    assert runner.thread_limits(2, alone=True, cores=2, environ={"OMP_NUM_THREADS": "1"})["OMP_NUM_THREADS"] == "1"
