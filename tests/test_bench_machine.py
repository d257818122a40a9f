"""What a benchmark record says about the processor it was timed on (``benchmarks/_common.py``)."""

import importlib.util

import pytest

from ensdiv.paths import project_root

ZEN3 = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 1
model name\t: AMD EPYC
flags\t\t: fpu sse2 avx avx2 fma vaes

processor\t: 1
model name\t: something else
"""
ZEN4 = ZEN3.replace("model\t\t: 1\n", "model\t\t: 17\n").replace("vaes", "vaes avx512f avx512bw")


def _common():
    spec = importlib.util.spec_from_file_location("_common", project_root() / "benchmarks" / "_common.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cpu_of_tells_two_epyc_generations_apart_by_family_model_and_avx512():
    common = _common()
    assert common.cpu_of(ZEN3) == {"name": "AMD EPYC", "family": 25, "model": 1, "avx512": False}
    assert common.cpu_of(ZEN4) == {"name": "AMD EPYC", "family": 25, "model": 17, "avx512": True}


@pytest.mark.parametrize("processor, name", [("x86_64", "x86_64"), ("", None)])
def test_cpu_of_without_proc_cpuinfo_names_what_platform_says(monkeypatch, processor, name):
    """Bad input: no ``/proc/cpuinfo`` (not Linux), and a platform that does not name its processor either."""
    common = _common()
    monkeypatch.setattr(common.platform, "processor", lambda: processor)
    assert common.cpu_of("") == {"name": name, "family": None, "model": None, "avx512": None}


def test_cpu_of_a_field_that_is_not_a_number_is_none():
    """Bad input: a family or model that is not a decimal number (another vendor's format) is None, not an error."""
    cpu = _common().cpu_of(ZEN3.replace("cpu family\t: 25", "cpu family\t: 6a"))
    assert cpu["family"] is None and cpu["model"] == 1
