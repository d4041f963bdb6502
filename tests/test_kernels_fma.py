"""The AVX2 build of the kernels is compiled with -mfma (fused multiply-adds in the
ABA's per-body arithmetic, cysrc/simd.h td_fma): treedyn/_ext.py must pick it only
where the CPU runs both AVX2 and FMA3; a CPU with AVX2 but no FMA gets the
baseline build (here with the CPU flags mocked)."""
import os
import sys

import pytest

from treedyn import _ext


class _Flags:
    """A stand-in for the baseline module's CPU checks."""

    def __init__(self, avx2, fma):
        self._avx2, self._fma = avx2, fma

    def _cpu_has_avx2(self):
        return self._avx2

    def _cpu_has_fma(self):
        return self._fma


@pytest.mark.parametrize("avx2, fma", [(True, False), (False, True), (False, False)])
def test_a_cpu_without_avx2_and_fma_gets_the_baseline_build(monkeypatch, avx2, fma):
    fake = _Flags(avx2, fma)
    monkeypatch.setattr(_ext, "_baseline", fake)
    monkeypatch.setenv("TREEDYN_KERNELS", "auto")
    assert not _ext._cpu_runs_avx2_build()
    assert _ext._select() is fake
    monkeypatch.setenv("TREEDYN_KERNELS", "avx2")
    with pytest.raises(ImportError, match="does not run AVX2 and FMA code"):
        _ext._select()
    monkeypatch.setenv("TREEDYN_KERNELS", "baseline")
    assert _ext._select() is fake


def test_a_cpu_with_avx2_and_fma_gets_the_avx2_build(monkeypatch):
    avx2 = pytest.importorskip("treedyn._kernels_avx2")
    fake = _Flags(True, True)
    monkeypatch.setattr(_ext, "_baseline", fake)
    for choice in ("auto", "avx2"):
        monkeypatch.setenv("TREEDYN_KERNELS", choice)
        assert _ext._cpu_runs_avx2_build()
        assert _ext._select() is avx2
    monkeypatch.setenv("TREEDYN_KERNELS", "baseline")
    assert _ext._select() is fake


@pytest.mark.skipif(not sys.platform.startswith("linux") or not os.path.exists("/proc/cpuinfo"),
                    reason="reads /proc/cpuinfo")
def test_the_cpu_checks_match_the_kernel_flags():
    flags = set()
    with open("/proc/cpuinfo") as fh:
        for line in fh:
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    if not flags:
        pytest.skip("no flags line in /proc/cpuinfo")
    assert _ext._baseline._cpu_has_avx2() == ("avx2" in flags)
    assert _ext._baseline._cpu_has_fma() == ("fma" in flags)
    assert _ext._cpu_runs_avx2_build() == ({"avx2", "fma"} <= flags)


def test_neither_build_imports_libm_fma():
    """td_fma is a compiler builtin in the AVX2 build (one instruction) and a product
    and a sum in the baseline build: neither module may import libm's fma, the
    software emulation, which is slow."""
    import shutil
    import subprocess
    if shutil.which("nm") is None:
        pytest.skip("no nm")
    mods = [_ext._baseline]
    try:
        import treedyn._kernels_avx2 as w
        mods.append(w)
    except ImportError:
        pass
    for mod in mods:
        r = subprocess.run(["nm", "-D", "--undefined-only", mod.__file__], capture_output=True,
                           text=True)
        assert r.returncode == 0, r.stderr
        names = {line.split()[-1].split("@")[0] for line in r.stdout.splitlines() if line.strip()}
        assert not names & {"fma", "fmaf", "fmal"}, mod.__name__
