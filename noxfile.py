"""Developer sessions. `nox` runs lint, the distribution checks, the full test suite and the docs build (what CI
runs); `nox -s core`, `nox -s openmp` ... run one package.

Every session installs the packages from this checkout (not editable: the tests see what users get).
"""

from __future__ import annotations

import glob

import nox

nox.options.sessions = ["lint", "dist", "tests", "docs"]
nox.options.error_on_missing_interpreters = True

CORE = "./pypto-core[test,dask]"
OPENMP = "./pypto-backend-openmp"
TBB = "./pypto-backend-tbb"
OPENCL = "./pypto-backend-opencl[pocl]"  # with PoCL's CPU device: OpenCL without a GPU driver
CUDA = "./pypto-backend-cuda"  # launches through libcuda with cffi: installs anywhere, runs where there is a GPU
CONFORMANCE = "./pypto-conformance"
NUMBA = "./examples/pypto-backend-numba"  # the example third-party backend (pulls in numba)
LONGRUN_RECORD = "pypto-core/tests/reliability/results/longrun.json"  # what docs/reliability.md reports
FUZZ_REPORT = "pypto-core/tests/reliability/results/fuzz.json"
CONFORMANCE_FULL = "pypto-conformance/results/full.json"  # the full run's report (docs/conformance.md summarises it)
TORCH = "torch==2.13.0"  # the CPU build (a bare "torch" resolves to a CUDA build of several GB)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff: lint and formatting."""
    session.install("ruff>=0.17,<0.18")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def tests(session: nox.Session) -> None:
    """Every package's tests in one environment with every package installed."""
    session.install(CORE, OPENMP, TBB, OPENCL, CONFORMANCE, NUMBA, CUDA)
    session.install(TORCH)  # for pt.torch (pypto-core[torch]) and its tests
    session.run(
        "pytest",
        "pypto-core/tests",
        "pypto-backend-openmp/tests",
        "pypto-backend-tbb/tests",
        "pypto-backend-opencl/tests",
        "pypto-backend-cuda/tests",
        "pypto-conformance/tests",
        "examples/pypto-backend-numba/tests",
        "docs/test_docs.py",
        *session.posargs,
    )
    # the language, array-API, gradient, dask, indirect-indexing and control-flow tests once more, compiled by
    # the OpenMP backend
    session.run(
        "pytest",
        "pypto-core/tests/test_language.py",
        "pypto-core/tests/test_array_api.py",
        "pypto-core/tests/test_autodiff.py",
        "pypto-core/tests/test_dask.py",
        "pypto-core/tests/test_indirect.py",
        "pypto-core/tests/test_control.py",
        *session.posargs,
        env={"PYPTO_TEST_EXECUTOR": "openmp"},
    )
    session.run("pytest", "pypto-core/tests/test_language.py", *session.posargs, env={"PYPTO_TEST_EXECUTOR": "tbb"})
    session.run("pytest", "pypto-core/tests/test_language.py", *session.posargs, env={"PYPTO_TEST_EXECUTOR": "opencl"})
    # the shared conformance suite (catalogue + differential fuzzing): every case in every dtype on the reference
    # and OpenMP backends, every case in one dtype (taken in turn, so every dtype runs too) on the others; the whole
    # matrix on every backend is `nox -s conformance_full`, recorded in docs/conformance.md
    session.run("pypto-conformance", "--backend", "reference,openmp")
    session.run("pypto-conformance", "--backend", "tbb,opencl,numba", "--slice", "dtypes", "--max-examples", "60")
    # no cliff: every model block's forward pass at a small size near NumPy's speed or above (within the noise
    # margin benchmarks/models/run.py states), and the gradients of its training step equal to torch's
    session.run("python", "benchmarks/models/run.py", "--check")


DISTRIBUTIONS = ["pypto-core", "pypto-backend-openmp", "pypto-backend-tbb", "pypto-backend-cuda",
                 "pypto-backend-opencl", "pypto-conformance", "examples/pypto-backend-numba"]  # fmt: skip
LICENSE_CHECK = """
import sys, tarfile, zipfile, pathlib
dists = sorted(pathlib.Path(sys.argv[1]).iterdir())
for d in dists:
    names = zipfile.ZipFile(d).namelist() if d.suffix == ".whl" else tarfile.open(d).getnames()
    if not any(n.endswith("LICENSE") for n in names):
        sys.exit(f"{d.name} ships no LICENSE file")
print(len(dists), "distributions, each with its LICENSE")
"""


@nox.session
def dist(session: nox.Session) -> None:
    """Build every distribution's sdist and wheel, check their metadata renders on the package index
    (twine check --strict) and that each ships the LICENSE file."""
    session.install("build>=1.2", "twine>=5")
    out = session.create_tmp() + "/dist"
    session.run("python", "-c", f"import shutil; shutil.rmtree({out!r}, ignore_errors=True)")
    for d in DISTRIBUTIONS:
        session.run("python", "-m", "build", "--quiet", "--outdir", out, d)
    session.run("twine", "check", "--strict", *sorted(glob.glob(f"{out}/*")))
    session.run("python", "-c", LICENSE_CHECK, out)


@nox.session
def core(session: nox.Session) -> None:
    """pypto-core alone (no backend plugins installed)."""
    session.install(CORE)
    session.run("pytest", "pypto-core/tests", *session.posargs)


@nox.session
def conformance(session: nox.Session) -> None:
    """The conformance suite's own tests, then the suite on every installed backend."""
    session.install(CORE, OPENMP, CONFORMANCE)
    session.run("pytest", "pypto-conformance/tests", *session.posargs)
    session.run("pypto-conformance", "--backend", "all")


@nox.session
def conformance_full(session: nox.Session) -> None:
    """The whole conformance matrix (every case in every dtype, 300 random kernels) on every installed backend,
    outside CI's time budget; the JSON report goes to pypto-conformance/results/full.json (not kept in the
    repository) and its summary into docs/conformance.md."""
    session.install(CORE, OPENMP, TBB, OPENCL, CONFORMANCE, NUMBA, CUDA)
    session.run(
        "pypto-conformance", "--backend", "all", "--quiet-table", "--report", CONFORMANCE_FULL, *session.posargs
    )


@nox.session
def distributed(session: nox.Session) -> None:
    """Data-parallel training on 2 and 4 processes under torchrun (CI runs 2)."""
    session.install(CORE, OPENMP)
    session.install(TORCH)
    session.run("pytest", "pypto-core/tests/test_distributed.py", *session.posargs, env={"PYPTO_TEST_PROCESSES": "2,4"})


@nox.session
def openmp(session: nox.Session) -> None:
    """The OpenMP backend with the core."""
    session.install(CORE, OPENMP)
    session.run("pytest", "pypto-backend-openmp/tests", *session.posargs)
    session.run("pytest", "pypto-core/tests/test_language.py", *session.posargs, env={"PYPTO_TEST_EXECUTOR": "openmp"})


@nox.session
def numba(session: nox.Session) -> None:
    """The example Numba backend: its tests, then the conformance suite on it."""
    session.install(CORE, CONFORMANCE, NUMBA)
    session.run("pytest", "examples/pypto-backend-numba/tests", *session.posargs)
    session.run("pypto-conformance", "--backend", "numba")


@nox.session
def docs(session: nox.Session) -> None:
    """Build the documentation site (the pipeline diagram drawn from pypto-core's passes); any warning (broken
    link, page missing from the nav) fails it, and so does a page that would load anything from another host.
    Then every page is opened in a headless Chromium with other hosts unreachable (docs/check_browser.py: no
    request elsewhere, no failed request or script error, the pipeline diagram drawn with every stage); without
    a Chromium that check says it did not run, and fails where PYPTO_REQUIRE_BROWSER=1 (CI)."""
    session.install("./pypto-core", "mkdocs>=1.6,<2", "mkdocs-material>=9.5,<10", "playwright>=1.45")
    session.run("mkdocs", "build", "--strict", env={"NO_MKDOCS_2_WARNING": "1"})
    session.run("python", "docs/check_offline.py", "site")
    session.run("python", "docs/check_browser.py", "site")


@nox.session
def tbb(session: nox.Session) -> None:
    """The TBB backend with the core (oneTBB from the tbb-devel wheel)."""
    session.install(CORE, TBB)
    session.run("pytest", "pypto-backend-tbb/tests", *session.posargs)
    session.run("pytest", "pypto-core/tests/test_language.py", *session.posargs, env={"PYPTO_TEST_EXECUTOR": "tbb"})


@nox.session
def opencl(session: nox.Session) -> None:
    """The OpenCL backend on PoCL's CPU device: its tests, the language tests and the conformance suite on it."""
    session.install(CORE, OPENCL, CONFORMANCE)
    session.run("pytest", "pypto-backend-opencl/tests", *session.posargs)
    session.run("pytest", "pypto-core/tests/test_language.py", *session.posargs, env={"PYPTO_TEST_EXECUTOR": "opencl"})
    session.run("pypto-conformance", "--backend", "opencl")


@nox.session
def cuda(session: nox.Session) -> None:
    """The CUDA backend without a GPU: code generation, nvcc compilation of every conformance kernel for sm_90
    and sm_80, the launch path against a stand-in driver library (launch tests skip with the reason without a
    GPU; on a GPU machine benchmarks/gpu/run.sh runs them, the conformance suite and the GPU benchmarks)."""
    session.install(CORE, CONFORMANCE, CUDA)
    session.run("pytest", "pypto-backend-cuda/tests", *session.posargs)


@nox.session
def longrun(session: nox.Session) -> None:
    """Long runs (not part of CI's time budget), each with flat resident memory: 10^6 calls of a small kernel,
    and 10^4 distinct kernels compiled, called and dropped per backend (reference, openmp, tbb: about 2 hours
    here). The figures are recorded in pypto-core/tests/reliability/results/longrun.json for docs/reliability.md
    (`python pypto-core/tests/reliability/report.py --records-only`)."""
    session.install(CORE, OPENMP, TBB)
    session.run(
        "pytest",
        "-s",
        "pypto-core/tests/reliability/test_reliability_concurrency.py",
        "-k",
        "resident",
        *session.posargs,
        env={
            "PYPTO_LONGRUN_CALLS": "1000000",
            "PYPTO_LONGRUN_KERNELS": "10000",
            "PYPTO_LONGRUN_RECORD": LONGRUN_RECORD,
        },
    )


@nox.session
def fuzz(session: nox.Session) -> None:
    """Differential fuzzing at scale (not part of CI, which runs 300 examples): 2,000 per backend, the report
    kept in pypto-core/tests/reliability/results/fuzz.json for docs/reliability.md."""
    session.install(CORE, OPENMP, TBB, OPENCL, CONFORMANCE, NUMBA)
    session.run("pypto-conformance", "--backend", "all", "-k", "fuzz", "--max-examples", "2000",
                "--report", FUZZ_REPORT, *session.posargs)  # fmt: skip
