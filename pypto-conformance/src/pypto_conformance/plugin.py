"""The pytest plugin (entry point ``pytest11``): options, parametrisation, results and the report.

It is loaded by every pytest run in an environment where pypto-conformance is installed, so it
stays inert unless the suite's own tests (``pytest --pyargs pypto_conformance.suite``) are
collected: backends are only looked up when a conformance test is parametrised.
"""

from __future__ import annotations

import datetime
import os
import platform
from dataclasses import dataclass
from typing import Any

import pytest

from .backends import BackendTarget
from .results import OUTCOME_KEY, ResultCollector, headline, write_report
from .settings import DEFAULT_MAX_EXAMPLES, SLICES, ConformanceSettings

SETTINGS_KEY = pytest.StashKey[ConformanceSettings]()
COLLECTOR_KEY = pytest.StashKey[ResultCollector]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("pypto-conformance", "pypto backend conformance suite")
    group.addoption(
        "--pypto-backend",
        default=None,
        metavar="NAME|all",
        help="backend(s) to test: a name, a comma-separated list, or 'all' (default: every installed backend; "
        "unavailable ones are reported as skipped with the reason)",
    )
    group.addoption(
        "--pypto-xfails",
        default=None,
        metavar="FILE",
        help="TOML/JSON file of expected failures, each with a reason (the only way to skip a supported case)",
    )
    group.addoption(
        "--pypto-tolerances",
        default=None,
        metavar="FILE",
        help="TOML/JSON file replacing tolerance entries (per dtype, function, backend or case)",
    )
    group.addoption(
        "--pypto-max-examples",
        type=int,
        default=None,
        metavar="N",
        help=f"random kernels per backend, split evenly over the dtype families it supports "
        f"(default {DEFAULT_MAX_EXAMPLES})",
    )
    group.addoption("--pypto-report", default=None, metavar="FILE", help="write the results as JSON to FILE")
    group.addoption(
        "--pypto-slice",
        default="full",
        choices=SLICES,
        help="'full': every case in each of its dtypes (default); 'dtypes': each case in one of its dtypes, taken "
        "in turn, so every case and every dtype still runs on every backend (a quicker representative run)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: a large conformance case (run by default, deselect with -m 'not slow')")
    config.stash[SETTINGS_KEY] = ConformanceSettings.from_config(config)
    collector = ResultCollector()
    config.stash[COLLECTOR_KEY] = collector
    config.pluginmanager.register(collector, "pypto-conformance-results")


# -- parameters ------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class CaseParam:
    """A catalogue case (a kernel, or an array-API program) for one dtype on one backend."""

    case: Any
    dtype: str
    target: BackendTarget

    @property
    def result_key(self) -> tuple[str, str, str]:
        return (self.case.name, self.dtype, self.target.name)


@dataclass(frozen=True, eq=False)
class FuzzParam:
    """A fuzz campaign for one dtype family on one backend."""

    family: str
    target: BackendTarget

    @property
    def result_key(self) -> tuple[str, str, str]:
        return ("fuzz", self.family, self.target.name)


@dataclass(frozen=True, eq=False)
class BackendParam:
    """A backend's declaration (and, when it cannot run here, the reason)."""

    target: BackendTarget

    @property
    def result_key(self) -> tuple[str, str, str]:
        return ("declaration", "-", self.target.name)


def _params_of(settings: ConformanceSettings, cases: list[Any]) -> list[Any]:
    params = []
    for target in settings.targets():
        if not target.available:
            continue
        for n, case in enumerate(cases):
            dtypes = case.dtypes
            if settings.slice != "full":  # one dtype per case, in turn among those the backend has
                runnable = [d for d in case.dtypes if case.required_dtypes(d) <= target.dtypes] or list(case.dtypes)
                dtypes = (runnable[n % len(runnable)],)
            for dtype in dtypes:
                marks = settings.marks(case.name, dtype, target, case.required_dtypes(dtype), case.slow)
                param = CaseParam(case, dtype, target)
                params.append(pytest.param(param, id=f"{case.name}-{dtype}-{target.name}", marks=marks))
    return params


def _case_params(settings: ConformanceSettings) -> list[Any]:
    from .cases import all_cases

    return _params_of(settings, all_cases())


def _array_params(settings: ConformanceSettings) -> list[Any]:
    from .cases.arrays import all_array_cases

    return _params_of(settings, all_array_cases())


def _gradient_params(settings: ConformanceSettings) -> list[Any]:
    from .cases.gradients import all_gradient_cases

    return _params_of(settings, all_gradient_cases())


def _fuzz_params(settings: ConformanceSettings) -> list[Any]:
    from .fuzz import FAMILIES

    params = []
    for target in settings.targets():
        if not target.available:
            continue
        for family in FAMILIES:
            marks = settings.marks("fuzz", family, target, {family})
            params.append(pytest.param(FuzzParam(family, target), id=f"fuzz-{family}-{target.name}", marks=marks))
    return params


def _backend_params(settings: ConformanceSettings) -> list[Any]:
    params = []
    for target in settings.targets():
        marks = [] if target.available else [pytest.mark.skip(reason=f"backend unavailable: {target.reason}")]
        params.append(pytest.param(BackendParam(target), id=f"declaration-{target.name}", marks=marks))
    return params


_PARAMETRISED = {
    "conformance_case": _case_params,
    "conformance_array": _array_params,
    "conformance_gradient": _gradient_params,
    "conformance_fuzz": _fuzz_params,
    "conformance_backend": _backend_params,
}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    for name, make in _PARAMETRISED.items():
        if name in metafunc.fixturenames:
            metafunc.parametrize(name, make(metafunc.config.stash[SETTINGS_KEY]))


# -- fixtures --------------------------------------------------------------------------------------


@pytest.fixture
def conformance_settings(request: pytest.FixtureRequest) -> ConformanceSettings:
    """The run's settings (tolerances, expected failures, fuzz budget)."""
    return request.config.stash[SETTINGS_KEY]


@pytest.fixture
def conformance_record(request: pytest.FixtureRequest):
    """Call with a :class:`pypto_conformance.runner.Outcome` to attach it to the test's report row."""

    def record(outcome: Any) -> None:
        request.node.stash[OUTCOME_KEY] = outcome

    return record


# -- reporting -------------------------------------------------------------------------------------


def machine() -> str:
    """Where the suite ran, for the report: CPU model (where the system says), CPUs, OS and Python."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), model)
    except OSError:
        pass
    return (
        f"{model}, {os.cpu_count()} CPUs, {platform.system()} {platform.machine()}, Python {platform.python_version()}"
    )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    settings = session.config.stash.get(SETTINGS_KEY, None)
    collector = session.config.stash.get(COLLECTOR_KEY, None)
    if settings is None or collector is None or settings.report is None:
        return
    backends = [t.describe() for t in settings.targets()]
    extra = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "max_examples": settings.max_examples,
        "xfails_unused": [e.describe() for e in settings.xfails if e not in settings.used_xfails],
    }
    write_report(settings.report, collector.records, backends, extra)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    collector = config.stash.get(COLLECTOR_KEY, None)
    settings = config.stash.get(SETTINGS_KEY, None)
    if collector is None or settings is None or not collector.records:
        return
    tr = terminalreporter
    tr.section("pypto conformance")
    counts = collector.summary()
    tr.write_line(", ".join(f"{n} {k}" for k, n in counts.items() if n))
    for r in collector.records:
        if r.outcome in ("failed", "error", "xpassed"):
            tr.write_line(
                f"{r.outcome.upper()}: {r.case} [{r.dtype}] on {r.backend}: {headline(r.message or r.reason)}"
            )
    for e in settings.xfails:
        if e not in settings.used_xfails:
            tr.write_line(f"warning: xfail entry matched nothing: {e.describe()}")
    if settings.report is not None:
        tr.write_line(f"JSON report: {settings.report}")
