"""A tool call that forks, loops, floods output, reads files or opens the network is an observation with an
error and leaves the host as it was, exactly as in the code verifier's tests (tests/test_code_sandbox.py);
one episode's files are invisible to every other; the SQL tool writes nothing.

Every case goes through ``ToolEnv.step``, so that what is tested is what the model sees: the observation and
the error kind its episode counts. Programs run under the native backend (namespaces, private uids) when the
tests run as root, else under whatever the sandbox could set up (``info`` says which). Turns the parser cannot
read (nesting, size, encoding, numbers out of range; and a fuzz of any text) are observations too.
"""

from __future__ import annotations

import hashlib
import json
import os
import site
import socket
import sqlite3
import sys
import time
import uuid

import psutil
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sandbox_attacks import (  # tests/sandbox_attacks.py (pytest puts tests/ on the path)
    BOUNDED_FORKS,
    DAEMON,
    FORK_BOMB,
    machine_healthy,
    sandbox_processes,
    secret_hunter,
)
from time_bounds import HANG_S, ROOM_S, eventually  # tests/time_bounds.py

from rewardlab.envs import EnvConfig, ToolEnv, Turn, build_env, parsing
from rewardlab.envs.base import EpisodeState
from rewardlab.envs.parsing import MAX_CALL_CHARS, MAX_CALL_DEPTH
from rewardlab.envs.tools import CalculatorError, calculate, echo_last_expression
from rewardlab.types import Record

KILL_S = 2.0
"""The tool timeout of ``short_env``: only programs that run forever unless killed at it."""
SANDBOX = {"max_processes": 16, "parallelism": 2}  # the code verifier's safety tests use these limits
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV_SECRET = f"rk-env-secret-{uuid.uuid4().hex}"


@pytest.fixture(scope="module")
def env():
    """The python tool, started (its zygote forked) while the host has a secret in its environment."""
    os.environ["RK_TEST_ENV_SECRET"] = ENV_SECRET
    try:
        tool_env = ToolEnv(
            ["python"], formats=["fenced"], tool_timeout=ROOM_S, tool_options={"python": SANDBOX}
        )
        assert observe(tool_env, "print('warm')")[0] == "warm"
    finally:
        del os.environ["RK_TEST_ENV_SECRET"]
    yield tool_env
    tool_env.close()


@pytest.fixture(scope="module")
def short_env():
    """The python tool with a short timeout, for programs that never end (the timeout is what is tested)."""
    tool_env = ToolEnv(["python"], formats=["fenced"], tool_timeout=KILL_S, tool_options={"python": SANDBOX})
    observe(tool_env, "pass")  # starts its sandbox (the observation does not matter: nothing is checked here)
    yield tool_env
    tool_env.close()


@pytest.fixture(scope="module")
def state_env():
    options = {"python": {**SANDBOX, "state": True}}
    tool_env = ToolEnv(["python"], formats=["fenced"], tool_timeout=ROOM_S, tool_options=options)
    yield tool_env
    tool_env.close()


def fenced(code: str) -> str:
    return f"```python\n{code}\n```\n"


def observe(env: ToolEnv, code: str, ep: EpisodeState | None = None) -> tuple[str, EpisodeState]:
    """One turn calling the python tool: its observation (never an exception) and the episode."""
    ep = ep or env.reset(Record())
    ep.turns.append(Turn("model", fenced(code)))
    result = env.step([ep], [fenced(code)], last=False)[0]
    assert not result.done and isinstance(result.observation, str)
    return result.observation, ep


def sandbox_of(env: ToolEnv):
    return env.tools["python"].sandbox


def children() -> int:
    """How many descendants this process has (the sandbox's warm zygote and workers among them, and each
    slot's spare supervisor, forked anew after every program: so a count, not the pids)."""
    return len(psutil.Process().children(recursive=True))


def needs_private_uid(env: ToolEnv) -> None:
    if not sandbox_of(env).info["private_uid"]:
        pytest.skip(
            "this machine cannot have it: a private uid (not root): RLIMIT_NPROC would count the user's own processes"
        )


# ----------------------------------------------------------------------------------------------------------
# processes, time, output, memory, disk
# ----------------------------------------------------------------------------------------------------------
def test_fork_bomb_is_contained(env, short_env):
    before = children()
    bounded = BOUNDED_FORKS  # ends by itself: the tool's ample timeout
    observation, ep = observe(env, bounded)
    if sandbox_of(env).info["private_uid"]:
        assert observation == "15" and not ep.tool_errors  # 16 processes: the program and 15 children
    needs_private_uid(env)
    bomb = FORK_BOMB  # never ends: killed at the short timeout
    t0 = time.monotonic()
    observation, ep = observe(short_env, bomb)
    assert time.monotonic() - t0 < HANG_S
    assert observation.endswith("error: timed out") and ep.tool_errors == {"timeout": 1}
    sandbox = sandbox_of(short_env)
    assert eventually(lambda: sandbox_processes(sandbox) == []), sandbox_processes(sandbox)
    assert eventually(lambda: children() <= before)  # the warm workers, and nothing the program started
    assert machine_healthy()


def test_process_outliving_the_call_is_killed(env):
    daemon = DAEMON + "print('parent done')\n"
    before = children()
    observation, ep = observe(env, daemon)
    assert observation == "parent done" and not ep.tool_errors
    assert eventually(lambda: sandbox_processes(sandbox_of(env)) == []), sandbox_processes(sandbox_of(env))
    assert eventually(lambda: children() <= before)


def test_infinite_loop_times_out(short_env):
    for loop in ["while True:\n    pass", "import time\nprint('started', flush=True)\ntime.sleep(3600)"]:
        t0 = time.monotonic()
        observation, ep = observe(short_env, loop)
        assert time.monotonic() - t0 < HANG_S
        assert observation.endswith("error: timed out") and ep.tool_errors == {"timeout": 1}
    assert observation.startswith("started")  # what it printed before is kept
    assert sandbox_processes(sandbox_of(short_env)) == []


def test_output_flood(env):
    t0 = time.monotonic()
    observation, ep = observe(env, "while True:\n    print('x' * 10000)")
    assert time.monotonic() - t0 < HANG_S
    assert ep.tool_errors == {"output_limit": 1}
    assert observation.endswith("error: output limit exceeded")
    assert len(observation) <= SANDBOX.get("max_output_mb", 16) * 2**20 + 100  # captured output is capped


def test_huge_allocation(env):
    observation, ep = observe(env, "x = bytearray(50 * 2**30)")
    assert observation == "MemoryError" and ep.tool_errors == {"memory": 1}
    assert machine_healthy()


def test_huge_file_is_refused(env):
    code = "f = open('big.bin', 'wb')\nchunk = b'0' * (1 << 20)\nfor _ in range(10 * 1024):\n    f.write(chunk)\n"
    observation, ep = observe(env, code)
    assert "File too large" in observation and ep.tool_errors == {"exception": 1}


# ----------------------------------------------------------------------------------------------------------
# what a call sees of the host
# ----------------------------------------------------------------------------------------------------------
def visible(env: ToolEnv, paths: list[str]) -> list[str]:
    observation, ep = observe(env, f"import os\nprint([p for p in {paths!r} if os.path.exists(p)])")
    assert not ep.tool_errors, observation
    return eval(observation)  # a list literal the program printed


def test_host_files_are_not_visible(env, tmp_path):
    hidden = [REPO, os.path.join(REPO, "data"), os.path.join(REPO, "tests"), os.path.abspath(__file__)]
    hidden += [*site.getsitepackages(), os.path.expanduser("~/.cache"), sys.prefix + "/pyvenv.cfg"]
    hidden += [os.path.expanduser("~/.cache/huggingface")]
    if sandbox_of(env).info["read_only_root"]:  # a root of its own (native, bwrap): none of these either
        hidden += ["/home", "/tmp", "/proc/self", "/proc/1", str(tmp_path)]  # /proc: an empty mount point
    hidden += [os.environ[k] for k in ("HF_HOME", "HF_HUB_CACHE", "HF_DATASETS_CACHE") if k in os.environ]
    assert visible(env, hidden) == []
    # the project's own code is not importable, nor any package outside the allow-list
    for name in ["rewardlab", "pytest", "torch", "psutil"]:
        observation, ep = observe(env, f"import {name}")
        assert "ModuleNotFoundError" in observation and ep.tool_errors == {"exception": 1}, name
    assert observe(env, "import numpy\nprint(numpy.arange(4).sum())")[0] == "6"
    # reading a project file by its host path fails
    observation, ep = observe(env, f"print(open({os.path.join(REPO, 'envs', 'tools.py')!r}).read())")
    assert "FileNotFoundError" in observation and ep.tool_errors == {"exception": 1}


def test_the_dataset_and_the_record_are_out_of_reach(env, tmp_path):
    secret = f"rk-secret-{uuid.uuid4().hex}"
    (tmp_path / "dataset.jsonl").write_text(f'{{"reference": "{secret}"}}\n')
    (tmp_path / "notes.txt").write_text(secret)
    hack = secret_hunter([str(tmp_path), "/tmp", REPO, "/proc/self", "/"]) + "print(secret())\n"
    ep = env.reset(Record(prompt="p", reference=secret, metadata={"answer": secret}))
    observation, ep = observe(env, hack, ep)
    assert observation == "not found" and secret not in observation


def test_host_environment_is_not_inherited(env):
    observation, _ = observe(
        env, "import os\nprint(sorted(os.environ))\nprint(os.environ.get('RK_TEST_ENV_SECRET'))"
    )
    assert ENV_SECRET not in observation and "RK_TEST_ENV_SECRET" not in observation


def test_no_network(env):
    # a server on the host's loopback: the call can neither reach it nor anything outside
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        server.settimeout(0.5)
        port = server.getsockname()[1]
        probe = (
            "import socket\n"
            f"for address in [('127.0.0.1', {port}), ('1.1.1.1', 53), ('8.8.8.8', 443)]:\n"
            "    try:\n"
            "        socket.create_connection(address, timeout=1).close()\n"
            "        print('connected', address)\n"
            "    except OSError as exc:\n"
            "        print('blocked', type(exc).__name__)\n"
        )
        observation, ep = observe(env, probe)
        with pytest.raises(OSError):  # socket.timeout: nobody connected
            server.accept()
    assert "connected" not in observation and observation.count("blocked") == 3, observation
    assert sandbox_of(env).info["network"] in ("network namespace", "sockets refused (audit hook)")
    observation, ep = observe(env, "import socket\nsocket.create_connection(('1.1.1.1', 53), timeout=1)")
    assert ep.tool_errors == {"exception": 1} and "Error" in observation.splitlines()[-1]


# ----------------------------------------------------------------------------------------------------------
# files: per call, per episode, never on the host
# ----------------------------------------------------------------------------------------------------------
WRITE = "open('note.txt', 'w').write({text!r})\nimport os\nprint(sorted(os.listdir('.')))"
READ = "import os\nprint(open('note.txt').read() if os.path.exists('note.txt') else 'missing')"


def test_one_episodes_files_are_invisible_to_another(env):
    a, b = env.reset(Record(id="a")), env.reset(Record(id="b"))
    # the same turn: both write note.txt, each sees only its own, in a directory of its own
    turns = [fenced(WRITE.format(text="from a") + "\n" + READ), fenced(READ)]
    out = env.step([a, b], turns, last=False)
    assert out[0].observation == "['note.txt']\nfrom a"
    assert out[1].observation == "missing"
    # a later call, of either episode, starts from an empty directory (no state)
    assert observe(env, READ, b)[0] == "missing"
    assert observe(env, READ, a)[0] == "missing"
    assert observe(env, "import os\nprint(os.listdir('.'))", a)[0] == "[]"


def test_with_state_an_episode_sees_its_own_files_only(state_env):
    a, b = state_env.reset(Record(id="a")), state_env.reset(Record(id="b"))
    out = state_env.step([a, b], [fenced(WRITE.format(text="from a")), fenced(READ)], last=False)
    assert out[0].observation == "['note.txt']" and out[1].observation == "missing"
    assert observe(state_env, READ, a)[0] == "from a"  # its own earlier cell re-ran
    assert observe(state_env, READ, b)[0] == "missing"
    out = state_env.step([a, b], [fenced(READ), fenced(WRITE.format(text="from b"))], last=False)
    assert out[0].observation == "from a" and out[1].observation == "['note.txt']"
    assert observe(state_env, READ, b)[0] == "from b"
    assert observe(state_env, READ, state_env.reset(Record(id="c")))[0] == "missing"


def test_files_never_reach_the_host(env, tmp_path):
    marker = f"rk-escape-{uuid.uuid4().hex}"
    targets = [
        f"/tmp/{marker}",
        str(tmp_path / marker),
        os.path.join(REPO, marker),
        f"../../../../tmp/{marker}",
        f"/{marker}",
        f"/runs/{marker}",
    ]
    sandbox = sandbox_of(env)
    tmp_before = set(os.listdir("/tmp"))
    before = children()
    for target in targets:
        observation, ep = observe(env, f"open({target!r}, 'w').write('x')")
        assert ep.tool_errors == {"exception": 1}, (target, observation)
        assert observation.splitlines()[-1].startswith(("FileNotFoundError", "PermissionError", "OSError"))
    # a file in the call's own directory is fine, and gone with the call
    observation, ep = observe(
        env, f"open({marker!r}, 'w').write('x')\nimport os\nprint(os.path.abspath({marker!r}))"
    )
    assert not ep.tool_errors
    inside = observation.strip()
    for path in [
        *targets,
        inside,
        os.path.join(sandbox._runs_dir, os.path.basename(os.path.dirname(inside))),
    ]:
        assert not os.path.exists(path), path
    assert [p for p in set(os.listdir("/tmp")) - tmp_before if marker in p] == []
    assert os.listdir(sandbox._runs_dir) == []  # the working directories are unmounted and gone
    assert not any(marker in name for _, _, files in os.walk(tmp_path) for name in files)
    assert eventually(lambda: children() <= before) and sandbox_processes(sandbox_of(env)) == []


# ----------------------------------------------------------------------------------------------------------
# sql: read-only
# ----------------------------------------------------------------------------------------------------------
SETUP_SQL = (
    "CREATE TABLE singer(id INTEGER PRIMARY KEY, name TEXT, age INTEGER);"
    "INSERT INTO singer VALUES (1, 'Ann', 31), (2, 'Bob', 45);"
)
WRITES = [
    "INSERT INTO singer VALUES (3, 'Eve', 20)",
    "UPDATE singer SET age = 0",
    "DELETE FROM singer",
    "REPLACE INTO singer VALUES (1, 'Mallory', 1)",
    "DROP TABLE singer",
    "CREATE TABLE stolen(x)",
    "ALTER TABLE singer ADD COLUMN x",
    "ATTACH DATABASE 'ATTACHED' AS other",
    "VACUUM INTO 'VACUUMED'",
    "PRAGMA writable_schema = 1",
    "PRAGMA journal_mode = DELETE",
    "BEGIN",
    "SELECT 1; DROP TABLE singer",
    "SELECT 1; INSERT INTO singer VALUES (4, 'Eve', 20)",
    "WITH x AS (SELECT 1) DELETE FROM singer",
    "SELECT load_extension('/tmp/evil')",
]


def fingerprint(path) -> tuple[str, int, int]:
    st = os.stat(path)
    return hashlib.sha256(path.read_bytes()).hexdigest(), st.st_size, st.st_mtime_ns


def sql_observation(env: ToolEnv, reference, query: str) -> tuple[str, EpisodeState]:
    ep = env.reset(Record(reference=reference))
    text = f"```sql\n{query}\n```\n"
    ep.turns.append(Turn("model", text))
    result = env.step([ep], [text], last=False)[0]
    assert not result.done
    return result.observation, ep


@pytest.mark.parametrize("engine", ["sqlite", "duckdb"])
def test_sql_tool_refuses_writes(tmp_path, engine):
    if engine == "duckdb":
        duckdb = pytest.importorskip("duckdb")
        path = tmp_path / "music.duckdb"
        conn = duckdb.connect(str(path))
        conn.execute(SETUP_SQL.replace("INTEGER PRIMARY KEY", "INTEGER"))
        conn.close()
    else:
        path = tmp_path / "music.sqlite"
        conn = sqlite3.connect(path)
        conn.executescript(SETUP_SQL)
        conn.commit()
        conn.close()
    reference = {"query": "SELECT name FROM singer", "db": str(path), "engine": engine}
    before, listing = fingerprint(path), sorted(os.listdir(tmp_path))
    env = ToolEnv(["sql"], formats=["fenced"], tool_timeout=ROOM_S)
    try:
        assert sql_observation(env, reference, "SELECT name FROM singer ORDER BY id")[0] == "name\nAnn\nBob"
        for query in WRITES:
            query = query.replace("ATTACHED", str(tmp_path / "attached.db"))
            query = query.replace("VACUUMED", str(tmp_path / "vacuumed.db"))
            observation, ep = sql_observation(env, reference, query)
            assert observation.startswith("error: "), (query, observation)
            (kind,) = ep.tool_errors
            assert kind.startswith("sql_") and kind != "sql_timeout", (query, kind)
        # still all there, read through the tool
        assert sql_observation(env, reference, "SELECT count(*) AS n FROM singer")[0] == "n\n2"
    finally:
        env.close()
    assert fingerprint(path) == before
    assert sorted(os.listdir(tmp_path)) == listing  # no attached, vacuumed or journal file


def test_sql_tool_writes_nothing_to_a_setup_database():
    reference = {"query": "SELECT name FROM singer", "setup_sql": SETUP_SQL}
    env = ToolEnv(["sql"], formats=["fenced"], tool_timeout=ROOM_S)
    try:
        for query in WRITES[:7]:
            observation, ep = sql_observation(env, reference, query)
            assert observation.startswith("error: ") and list(ep.tool_errors)[0].startswith("sql_"), query
        assert sql_observation(env, reference, "SELECT count(*) AS n FROM singer")[0] == "n\n2"
    finally:
        env.close()


# ----------------------------------------------------------------------------------------------------------
# parsing: any turn is an observation (depth, size, encoding), never an exception
# ----------------------------------------------------------------------------------------------------------
def echo(text: str) -> str:
    """A cheap user tool: what it was given."""
    return text


@pytest.fixture(scope="module")
def cheap_env():
    """Every call format, the in-process tools (no python sandbox: the fuzz test must stay fast)."""
    tool_env = ToolEnv(
        ["calculator", "sql", echo], formats=["tool_call", "fenced", "tag"], tool_timeout=ROOM_S
    )
    yield tool_env
    tool_env.close()


def turn_observation(env: ToolEnv, text: str) -> tuple[str, EpisodeState]:
    """One turn: its observation, as text a tokenizer can encode (no lone surrogate, no NUL), and the episode."""
    ep = env.reset(Record())
    (result,) = env.step([ep], [text], last=False)
    assert not result.done and isinstance(result.observation, str) and result.observation
    result.observation.encode("utf-8")
    assert "\x00" not in result.observation
    return result.observation, ep


def tool_call(arguments: str, name: str = '"calculator"') -> str:
    return f'<tool_call>{{"name": {name}, "arguments": {arguments}}}</tool_call>'


DEEP = 1000
REFUSED_CALLS = {
    # nesting: Python's JSON parser would raise RecursionError near 1,000 levels
    "deep list": (tool_call("[" * DEEP + "]" * DEEP), "too_large", "nested deeper than"),
    "deep object": (tool_call('{"a": ' * DEEP + "1" + "}" * DEEP), "too_large", "nested deeper than"),
    "deep call": (
        "<tool_call>" + "[" * DEEP + "]" * DEEP + "</tool_call>",
        "too_large",
        "nested deeper than",
    ),
    "deep unclosed": ("<tool_call>" + "[{" * DEEP + "</tool_call>", "too_large", "nested deeper than"),
    "deep arguments string": (
        tool_call('"' + "[" * DEEP + "]" * DEEP + '"'),
        "too_large",
        "nested deeper than",
    ),
    # size
    "multi-megabyte call": (
        tool_call('{"expression": "' + "1+" * 2_500_000 + '1"}'),
        "too_large",
        "characters long",
    ),
    "multi-megabyte tag": (
        "<calculator>" + "(" * 3_000_000 + "</calculator>",
        "too_large",
        "characters long",
    ),
    "multi-megabyte fence": ("```sql\n" + "SELECT 1;" * 500_000 + "\n```\n", "too_large", "characters long"),
    # encoding
    "escaped lone surrogate": (
        tool_call('{"expression": "\\ud800"}'),
        "malformed",
        "lone surrogate (U+D800)",
    ),
    "raw lone surrogate": (tool_call('{"expression": "1+\ud800"}'), "malformed", "lone surrogate"),
    "low surrogate in a key": (tool_call('{"\\udc80": "1"}'), "malformed", "lone surrogate (U+DC80)"),
    "lone surrogate in the name": (tool_call("{}", '"calc\\udfff"'), "malformed", "lone surrogate"),
    "surrogate in a tag": ("<calculator>1\udcff</calculator>", "malformed", "lone surrogate"),
    "surrogate in a fence": ("```sql\nSELECT '\ud83d'\n```\n", "malformed", "lone surrogate"),
    "escaped NUL": (tool_call('{"expression": "1\\u0000"}'), "malformed", "NUL character"),
    "NUL in arguments string": (tool_call('"{\\"expression\\": \\"\\\\u0000\\"}"'), "malformed", "NUL"),
    "raw NUL in JSON": (tool_call('{"expression": "1\x00"}'), "malformed", "not valid JSON"),
    "raw NUL in a tag": ("<calculator>1\x00+1</calculator>", "malformed", "NUL character"),
    "invalid escape": (tool_call('{"expression": "\\x41"}'), "malformed", "not valid JSON (Invalid \\escape"),
    "short unicode escape": (tool_call('{"expression": "\\u12"}'), "malformed", "not valid JSON"),
    "non-hex unicode escape": (tool_call('{"expression": "\\uZZZZ"}'), "malformed", "not valid JSON"),
    # numbers Python will not hold
    "1e999999": (tool_call('{"expression": 1e999999}'), "too_large", "out of range (1e999999)"),
    "-1e999999": (tool_call("[-1e999999]"), "too_large", "out of range"),
    "float of 5,000 digits": (tool_call("[1" + "0" * 5000 + ".5]"), "too_large", "out of range"),
    "50,000-digit integer": (tool_call('{"n": ' + "7" * 50_000 + "}"), "too_large", "more than 4300 digits"),
    "negative 5,000-digit integer": (
        tool_call("[-" + "9" * 5000 + "]"),
        "too_large",
        "more than 4300 digits",
    ),
    "integer in arguments string": (tool_call('"[' + "1" * 5000 + ']"'), "too_large", "more than 4300"),
    "NaN": (tool_call('{"expression": NaN}'), "malformed", "NaN is not JSON"),
    "-Infinity": (tool_call("[-Infinity]"), "malformed", "Infinity is not JSON"),
}


@pytest.mark.parametrize("case", REFUSED_CALLS, ids=list(REFUSED_CALLS))
def test_unreadable_calls_are_observations(cheap_env, case):
    text, kind, message = REFUSED_CALLS[case]
    t0 = time.monotonic()
    observation, ep = turn_observation(cheap_env, text)
    # a hang guard, not a speed: a parse that is quadratic or worse on these megabytes would take minutes
    assert time.monotonic() - t0 < HANG_S
    assert observation.startswith("error: ") and message in observation, observation[:200]
    assert ep.tool_errors == {kind: 1} and ep.tool_calls == 1


def test_limits_are_exact_and_configurable(cheap_env):
    # {"name": ..., "arguments": {"text": [[...]]}}: two levels of call, the rest of the list
    inner = MAX_CALL_DEPTH - 2
    nested = '{"text": ' + "[" * inner + "]" * inner + "}"
    observation, ep = turn_observation(cheap_env, tool_call(nested, '"echo"'))
    assert not ep.tool_errors and observation == "[" * inner + "]" * inner  # read, and run
    observation, ep = turn_observation(cheap_env, tool_call('{"text": [' + nested[9:-1] + "]}", '"echo"'))
    assert ep.tool_errors == {"too_large": 1}
    pad = MAX_CALL_CHARS - len(tool_call('{"text": ""}', '"echo"'))
    assert turn_observation(cheap_env, tool_call(f'{{"text": "{"x" * pad}"}}', '"echo"'))[0] == "x" * pad
    observation, ep = turn_observation(cheap_env, tool_call(f'{{"text": "{"x" * (pad + 1)}"}}', '"echo"'))
    assert ep.tool_errors == {"too_large": 1}
    # the environment's own limits, also from the config (env.kwargs)
    env = build_env(
        EnvConfig(name="tools", tools=["calculator"], formats=["tag"], kwargs={"max_call_chars": 30})
    )
    assert turn_observation(env, "<calculator>1+1</calculator>")[0] == "2"
    observation, ep = turn_observation(env, "<calculator>" + "1+" * 10 + "1</calculator>")
    assert "at most 30" in observation and ep.tool_errors == {"too_large": 1}
    env = ToolEnv(["calculator"], max_call_depth=2)
    assert turn_observation(env, tool_call('{"expression": "6*7"}'))[0] == "42"
    assert turn_observation(env, tool_call('{"expression": ["6*7"]}'))[1].tool_errors == {"too_large": 1}
    for bad in ({"max_call_chars": 0}, {"max_call_depth": 1}):
        with pytest.raises(ValueError, match="max_call"):
            ToolEnv(["calculator"], **bad)


def test_a_100k_digit_integer(cheap_env):
    huge = tool_call('{"expression": ' + "1" * 100_000 + "}")
    assert "characters long" in turn_observation(cheap_env, huge)[0]  # over the size limit first
    env = ToolEnv(["calculator"], max_call_chars=10**6)
    observation, ep = turn_observation(env, huge)
    assert "more than 4300 digits" in observation and ep.tool_errors == {"too_large": 1}


def test_backstops_of_the_limits(monkeypatch):
    """With the cheap checks off, the parser's own refusals still end as observations."""
    env = ToolEnv(["calculator"], max_call_chars=10**6)
    monkeypatch.setattr(parsing, "_too_deep", lambda text, max_depth: False)
    observation, ep = turn_observation(env, tool_call("[" * 100_000 + "]" * 100_000))
    assert "nested too deeply" in observation and ep.tool_errors == {"too_large": 1}
    monkeypatch.setattr(parsing, "MAX_INT_DIGITS", 10**9)  # Python's own int limit then refuses (ValueError)
    observation, ep = turn_observation(env, tool_call("[" + "1" * 100_000 + "]"))
    assert "number Python cannot read" in observation and ep.tool_errors == {"too_large": 1}


def test_python_parsing_of_model_code_never_raises():
    """The python tool reads the code's last expression in this process: a parse that fails leaves the code
    to report its own error in the sandbox."""
    for code in [
        "-" * 50_000 + "1",
        "-" * 900 + "1",
        "1+" * 3000 + "1",
        "(" * 300 + ")" * 300,
        "\ud800",
        "1\x00",
    ]:
        assert echo_last_expression(code) == code
    for expression in ["\ud800", "1\x00", "-" * 50_000 + "1", "1+" * 50_000 + "1"]:
        with pytest.raises(CalculatorError):
            calculate(expression)


# A fuzz: any text, text inside the call markers, JSON of any shape (surrogates, NaN, deep nesting)
_CHARS = st.one_of(
    st.characters(), st.integers(0xD800, 0xDFFF).map(chr), st.sampled_from('\x00[]{}":,\\<>/`\n')
)
_TEXT = st.text(_CHARS, max_size=40)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | _TEXT,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(_TEXT, children, max_size=3),
    max_leaves=12,
)
_NAMES = st.sampled_from(["calculator", "echo", "sql", "nope", ""]) | _TEXT
_WRAPPERS = st.sampled_from(
    [
        "<tool_call>{}</tool_call>",
        "<tool_call>{}",
        "<calculator>{}</calculator>",
        "<echo>{}",
        "```sql\n{}\n```\n",
    ]
)

_BRACKETS = [("[", "]"), ("{", "}"), ('{"a": ', "}"), ('"[', ""), ("[{", "}]")]


@st.composite
def _turns(draw) -> str:
    kind = draw(st.sampled_from(["text", "wrapped", "json", "json string", "deep", "soup"]))
    if kind == "text":
        return draw(_TEXT)
    if kind == "wrapped":
        return draw(_WRAPPERS).replace("{}", draw(_TEXT))
    if kind in ("json", "json string"):
        value = draw(_JSON)
        call = {"name": draw(_NAMES), "arguments": json.dumps(value) if kind == "json string" else value}
        return f"<tool_call>{json.dumps(call, ensure_ascii=draw(st.booleans()))}</tool_call>"
    if kind == "deep":
        n, (opening, closing) = draw(st.integers(0, 3000)), draw(st.sampled_from(_BRACKETS))
        return tool_call(opening * n + closing * draw(st.integers(0, n)))
    return "<tool_call>" + draw(st.text(st.sampled_from('[]{}",:0\\e9 '), max_size=300)) + "</tool_call>"


@settings(max_examples=200, deadline=None, database=None)  # no example files in the repository
@given(st.lists(_turns(), min_size=1, max_size=3).map("".join))
def test_fuzz_any_turn_is_an_observation_or_an_answer(cheap_env, text):
    ep = cheap_env.reset(Record())
    (result,) = cheap_env.step([ep], [text], last=False)
    if result.done:
        assert cheap_env.calls(text) == [] and result.observation is None
    else:
        assert isinstance(result.observation, str) and result.observation
        result.observation.encode("utf-8")
        assert ep.tool_calls >= 1 and sum(ep.tool_errors.values()) <= ep.tool_calls
