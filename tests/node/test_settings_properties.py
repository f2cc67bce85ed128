"""Property: any configuration - YAML text, key/value pairs, environment, flags - becomes
Settings or a ConfigError naming what is wrong; no other exception escapes."""

from __future__ import annotations

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from exporter.app.settings import OPTIONS, Settings, build_settings, load_yaml
from exporter.core.options import ConfigError

_KEYS = st.one_of(st.sampled_from([o.key for o in OPTIONS]), st.text(max_size=12))
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(
        [
            "10s",
            "1.5m",
            "500ms",
            "0s",
            "-1s",
            "1e400s",
            "auto",
            "off",
            "healthy",
            "a3",
            ":9435",
            "127.0.0.1:0",
            "[::1]:99999",
            "usages,ecc",
            "usages,nope",
            "true",
            "0",
            "9" * 5000,
        ]
    ),
)
_VALUES = st.one_of(_SCALARS, st.lists(_SCALARS, max_size=3), st.dictionaries(st.text(max_size=5), _SCALARS, max_size=2))


def _check(file_values=None, env=None, flags=None) -> None:
    try:
        result = build_settings(file_values, env, flags)
    except ConfigError as exc:
        assert exc.problems and all(isinstance(p, str) for p in exc.problems)
    else:
        assert isinstance(result, Settings)
        durations = [v for k, v in vars(result).items() if isinstance(v, float)]
        assert all(0 < v < float("inf") for v in durations), result  # NaN and infinity are refused


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.dictionaries(_KEYS, _VALUES, max_size=6))
@example(values={"max_age": "1e400s"})  # a duration beyond float range
@example(values={"npu_smi.max_concurrency": "9" * 5000})  # an int past Python's digit limit
@example(values={"listen": ["a", "b"]})
@example(values={"max_age": float("nan")})  # was accepted: nothing would ever be fresh
@example(values={"npu_smi.interval": float("inf")})
def test_file_values(values):
    _check(file_values=values)


@settings(max_examples=200, deadline=None)
@given(env=st.dictionaries(st.sampled_from([o.env_name for o in OPTIONS]), st.text(max_size=20), max_size=5))
def test_environment(env):
    _check(env=env)


@settings(max_examples=200, deadline=None)
@given(
    flags=st.dictionaries(
        st.sampled_from([o.key for o in OPTIONS]), st.one_of(st.text(max_size=15), st.lists(st.text(max_size=8), max_size=3)), max_size=5
    )
)
def test_flags(flags):
    _check(flags=flags)


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=200))
@example(text="a: &x [*x]")
@example(text="npu_smi: {timeout: [1, {2: 3}]}")
@example(text="? [a, b]\n: 1")  # a non-string key
@example(text="!!binary aGVsbG8=")
def test_yaml_text(text):
    try:
        values = load_yaml(text)
    except ConfigError:
        return
    _check(file_values=values)
