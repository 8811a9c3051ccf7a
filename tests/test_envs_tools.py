"""Tools of multi-turn environments: call formats, the calculator, a user's function, ``ToolEnv.step`` and
the ``python`` and ``sql`` tools. Every failure is an observation with an error kind, never an exception."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sqlite3
import subprocess
import sys
import threading
import time

import pytest
from time_bounds import ROOM_S  # tests/time_bounds.py

from rewardlab.envs import ToolEnv, Turn
from rewardlab.envs.base import END_ANSWER, END_MAX_TURNS, EpisodeState
from rewardlab.envs.parsing import parse_tool_calls, stop_strings
from rewardlab.envs.tools import CalculatorTool, FunctionTool, SQLTool, build_tool, echo_last_expression
from rewardlab.types import Record

PRIMARY = {"python": "code", "sql": "query", "calculator": "expression"}
ALL = ["tool_call", "fenced", "tag"]
SANDBOX = {"max_processes": 16, "parallelism": 2}  # as the code verifier's sandbox tests
SETUP_SQL = (
    "CREATE TABLE singer(id INTEGER, name TEXT, age INTEGER);"
    "INSERT INTO singer VALUES (1, 'Ann', 31), (2, 'Bob', 45), (3, 'Cy', 27);"
)
SQL_REFERENCE = {"query": "SELECT name FROM singer", "setup_sql": SETUP_SQL}


def parse(text: str, formats=ALL):
    return parse_tool_calls(text, formats, PRIMARY)


def episode(record: Record | None = None) -> EpisodeState:
    return EpisodeState(record=record or Record())


def step_one(env: ToolEnv, ep: EpisodeState, text: str, last: bool = False):
    """One model turn of one episode, as the rollout loop does it (the turn is in the transcript first)."""
    ep.turns.append(Turn("model", text))
    return env.step([ep], [text], last)[0]


def fenced(code: str, lang: str = "python") -> str:
    return f"Let me check.\n```{lang}\n{code}\n```\n"


# ----------------------------------------------------------------------------------------------------------
# parsing
# ----------------------------------------------------------------------------------------------------------
def test_tool_call_format():
    text = (
        'I will compute.\n<tool_call>{"name": "calculator", "arguments": {"expression": "2+3"}}</tool_call>'
    )
    (call,) = parse(text, ["tool_call"])
    assert call.name == "calculator" and call.arguments == {"expression": "2+3"} and call.error is None
    assert call.raw.startswith("<tool_call>") and call.raw.endswith("</tool_call>")
    assert call.start == text.index("<tool_call>")
    # "parameters" is read as "arguments"; no arguments at all is an empty dict
    (call,) = parse('<tool_call>{"name": "python", "parameters": {"code": "1"}}</tool_call>', ["tool_call"])
    assert call.arguments == {"code": "1"}
    (call,) = parse('<tool_call>{"name": "python"}</tool_call>', ["tool_call"])
    assert call.arguments == {} and call.error is None


def test_arguments_given_as_a_json_string():
    text = '<tool_call>{"name": "calculator", "arguments": "{\\"expression\\": \\"6*7\\"}"}</tool_call>'
    (call,) = parse(text, ["tool_call"])
    assert call.error is None and call.arguments == {"expression": "6*7"}
    (call,) = parse('<tool_call>{"name": "python", "arguments": ""}</tool_call>', ["tool_call"])
    assert call.error is None and call.arguments == {}


def test_fenced_format():
    (call,) = parse(fenced("print(1)"), ["fenced"])
    assert call.name == "python" and call.arguments["code"].strip() == "print(1)" and call.error is None
    (call,) = parse(fenced("SELECT 1", "sql"), ["fenced"])
    assert call.name == "sql" and call.arguments["query"].strip() == "SELECT 1"
    for alias in ("py", "python3", "Python"):
        assert [c.name for c in parse(fenced("1", alias), ["fenced"])] == ["python"]
    assert [c.name for c in parse(fenced("SELECT 1", "sqlite"), ["fenced"])] == ["sql"]
    # a block of a tool the environment does not have is not a call
    assert parse_tool_calls(fenced("SELECT 1", "sql"), ["fenced"], {"python": "code"}) == []


def test_untagged_or_other_language_fence_is_not_a_call():
    assert parse("Here is the output:\n```\nprint(1)\n```\n", ["fenced"]) == []
    assert parse("```text\nprint(1)\n```\n```json\n{}\n```\n", ["fenced"]) == []
    assert parse("inline ```python is nice``` text", ["fenced"]) == []


def test_fence_closes_at_a_fence_line_only():
    code = 'print("```")\nprint("done")'
    (call,) = parse(fenced(code), ["fenced"])
    assert call.error is None and call.arguments["code"].strip() == code
    # the closing fence ends the turn (the stop string cut the text there): closed
    (call,) = parse("```python\nprint(1)\n```", ["fenced"])
    assert call.error is None and call.arguments["code"].strip() == "print(1)"


def test_tag_format():
    (call,) = parse("So: <calculator> 12*7 </calculator>", ["tag"])
    assert call.name == "calculator" and call.arguments == {"expression": "12*7"} and call.error is None
    (call,) = parse("<python>print(2)</python>", ["tag"])
    assert call.name == "python" and call.arguments == {"code": "print(2)"}


def test_several_calls_in_order_of_position():
    text = (
        "<calculator>1+1</calculator> then\n"
        '<tool_call>{"name": "sql", "arguments": {"query": "SELECT 1"}}</tool_call>\n'
        "```python\nprint(3)\n```\n"
        "<calculator>2+2</calculator>"
    )
    calls = parse(text)
    assert [c.name for c in calls] == ["calculator", "sql", "python", "calculator"]
    assert [c.start for c in calls] == sorted(c.start for c in calls)
    assert calls[-1].arguments == {"expression": "2+2"}
    # only the formats asked for are read
    assert [c.name for c in parse(text, ["tag"])] == ["calculator", "calculator"]
    assert [c.name for c in parse(text, ["tool_call"])] == ["sql"]
    assert parse("no call here, just 2+2 = 4", ALL) == []


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("<tool_call>{name: calculator}</tool_call>", "not valid JSON"),
        ('<tool_call>{"arguments": {"expression": "1"}}</tool_call>', "needs"),
        ('<tool_call>{"name": "", "arguments": {}}</tool_call>', "needs"),
        ('<tool_call>["calculator"]</tool_call>', "needs"),
        ('<tool_call>{"name": "calculator", "arguments": {"expression": "1"}}', "unclosed <tool_call>"),
        ('<tool_call>{"name": "calculator", "arguments": [1]}</tool_call>', "must be a JSON object"),
        ('<tool_call>{"name": "calculator", "arguments": "expression=1"}</tool_call>', "string but not JSON"),
        ("<calculator>1+1", "unclosed call"),
        ("```python\nprint(1)\n", "unclosed call"),
    ],
)
def test_malformed_calls_are_calls_with_an_error(text, error):
    (call,) = parse(text)
    assert call.error is not None and error in call.error
    assert call.raw


def test_stop_strings_per_format():
    assert stop_strings(["tool_call"], ["python"]) == ["</tool_call>"]
    assert stop_strings(["fenced"], ["python"]) == ["```\n"]
    assert stop_strings(["fenced"], ["calculator"]) == []  # no tool a fence can call
    assert stop_strings(["tag"], ["calculator", "python"]) == ["</calculator>", "</python>"]
    assert stop_strings(ALL, ["sql"]) == ["</tool_call>", "```\n", "</sql>"]
    # the opening fence of a call never contains the fence stop string
    assert "```\n" not in "```python\n"
    env = ToolEnv(["calculator"], formats=["tool_call", "tag"])
    assert list(env.stop) == ["</tool_call>", "</calculator>"]


# ----------------------------------------------------------------------------------------------------------
# calculator
# ----------------------------------------------------------------------------------------------------------
def calc(expression: str):
    return CalculatorTool().run([(episode(), {"expression": expression})], 1.0)[0]


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("123*456", "56088"),
        ("1/3*3", "1"),
        ("2**10", "1024"),
        ("-5 + 3", "-2"),
        ("-(2 - 7) * -3", "-15"),
        ("(1 + 2) * (3 + 4)", "21"),
        ("2**-2", "0.25"),
        ("10 // 3", "3"),
        ("-7 % 3", "2"),
        ("1/3", "0.333333333333"),
        ("0.1 + 0.2", "0.3"),
        ("2.5 * 2", "5"),
        ("1_000 * 3", "3000"),
        ("2**100", str(2**100)),
    ],
)
def test_calculator_is_exact(expression, expected):
    result = calc(expression)
    assert (result.output, result.error) == (expected, None)


@pytest.mark.parametrize(
    "expression",
    [
        "x + 1",
        "abs(-1)",
        "().__class__",
        "(1).__class__",
        "[1, 2]",
        "'a' * 3",
        "True + 1",
        "1 if 1 else 2",
        "1 < 2",
        "lambda: 1",
        "9**9**9",
        "10**2000",
        "2**0.5",
        "1/0",
        "1 % 0",
        "5 // 0.0",
        "0**-1",
        "1e999",
        "",
        "1 +",
        "-" * 50_000 + "1",
        "(" * 300 + "1" + ")" * 300,
        "1" * 5000,
    ],
)
def test_calculator_refusals_are_errors(expression):
    result = calc(expression)
    assert result.error == "exception" and result.output.startswith("error: ")


def test_calculator_runs_no_code(tmp_path):
    marker = tmp_path / "ran"
    for code in [
        f"__import__('os').system('touch {marker}')",
        f"open({str(marker)!r}, 'w')",
        "exec('1')",
        "[c for c in ().__class__.__base__.__subclasses__()]",
    ]:
        result = calc(code)
        assert result.error == "exception" and "not allowed" in result.output, code
    assert not marker.exists()


def test_calculator_bad_arguments_and_the_tag_format():
    result = CalculatorTool().run([(episode(), {"expression": 5})], 1.0)[0]
    assert result.error == "bad_arguments"
    # one argument under another name is taken as the expression
    assert CalculatorTool().run([(episode(), {"expr": "6*7"})], 1.0)[0].output == "42"
    env = ToolEnv(["calculator"], formats=["tag"])
    ep = episode()
    assert step_one(env, ep, "<calculator>123*456</calculator>").observation == "56088"
    assert ep.tool_calls == 1 and not ep.tool_errors


def test_calculator_is_the_only_tool_run_for_tags():
    env = ToolEnv(["calculator"], formats=["tag"])
    ep = episode()
    result = step_one(env, ep, "<calculator>1/0</calculator>")
    assert result.observation == "error: division by zero" and not result.done
    assert ep.tool_errors == {"exception": 1}


# ----------------------------------------------------------------------------------------------------------
# a user's function
# ----------------------------------------------------------------------------------------------------------
def lookup(city: str, unit: str = "C") -> str:
    """The temperature of a city."""
    return f"{city}: 21{unit}"


def test_function_tool_keyword_arguments():
    tool = FunctionTool(lookup)
    assert tool.name == "lookup" and tool.primary == "city"
    assert tool.description == "The temperature of a city."
    out = tool.run([(episode(), {"city": "Oslo"}), (episode(), {"city": "Rome", "unit": "F"})], 1.0)
    assert [(r.output, r.error) for r in out] == [("Oslo: 21C", None), ("Rome: 21F", None)]
    assert FunctionTool(lambda: None, name="nothing").run([(episode(), {})], 1.0)[0].output == ""


def test_function_tool_receives_the_episode():
    seen = []

    def remember(note: str, episode: EpisodeState) -> int:
        seen.append(episode)
        episode.data.setdefault("notes", []).append(note)
        return len(episode.data["notes"])

    tool = FunctionTool(remember)
    assert tool.takes_episode and tool.primary == "note"
    a, b = episode(), episode()
    assert [r.output for r in tool.run([(a, {"note": "x"}), (b, {"note": "y"})], 1.0)] == ["1", "1"]
    assert tool.run([(a, {"note": "z"})], 1.0)[0].output == "2"
    assert seen == [a, b, a] and a.data["notes"] == ["x", "z"]
    # an "episode" argument from the model never replaces the episode
    result = tool.run([(a, {"note": "w", "episode": "forged"})], 1.0)[0]
    assert result.error is None and seen[-1] is a


def test_function_tool_exception_and_bad_arguments():
    def broken(x):
        return len(x) / 0

    tool = FunctionTool(broken)
    result = tool.run([(episode(), {"x": "abc"})], 1.0)[0]
    assert result.error == "exception" and result.output == "error: ZeroDivisionError: division by zero"
    # a TypeError raised inside the function is the function's failure, not bad arguments
    result = tool.run([(episode(), {"x": 5})], 1.0)[0]
    assert result.error == "exception" and result.output.startswith("error: TypeError: ")
    for args in ({}, {"x": 1, "y": 2}, {"y": 1}):
        result = tool.run([(episode(), args)], 1.0)[0]
        assert result.error == "bad_arguments" and result.output.startswith("error: bad arguments"), args
    result = FunctionTool(lookup).run([(episode(), {"city": "Oslo", "episode": 1})], 1.0)[0]
    assert result.error == "bad_arguments"


def test_function_tool_timeout():
    release, ok_answered = threading.Event(), threading.Event()

    def maybe_stuck(x: str) -> str:
        if x == "stuck":
            release.wait(60)
        if x == "held":  # stuck until its neighbour in the batch has answered
            ok_answered.wait(60)
        if x == "ok":
            ok_answered.set()
        return x.upper()

    tool = FunctionTool(maybe_stuck)
    try:
        # 40 stuck calls share the batch's one deadline: waited for one after the other they would take
        # 40 x 0.3 s = 12 s, past the 10 s bound (a bound that separates the two, not a speed)
        t0 = time.monotonic()
        out = tool.run([(episode(), {"x": "stuck"}) for _ in range(40)], 0.3)
        assert time.monotonic() - t0 < 10
        assert [r.error for r in out] == ["timeout"] * 40 and out[0].output == "error: timed out after 0.3s"
        # the stuck calls (still running in the background) hold up no later call of the same tool: held up,
        # this call would wait for them (60 s) and answer its own timeout (30 s) instead of "A"
        out = tool.run([(episode(), {"x": "a"})], 30.0)
        assert [(r.output, r.error) for r in out] == [("A", None)]
        # a call beside a stuck one in the same batch gets its own answer, while its neighbour is stuck: the
        # neighbour waits for that answer (an order, not a stopwatch; the batch has ample time). A batch run
        # one call after the other would leave "held" waiting: timed out, 30 s (the hang guard).
        t0 = time.monotonic()
        out = tool.run([(episode(), {"x": "held"}), (episode(), {"x": "ok"})], ROOM_S)
        assert [(r.output, r.error) for r in out] == [("HELD", None), ("OK", None)]
        assert time.monotonic() - t0 < 10
    finally:
        release.set()


def test_a_stuck_function_does_not_hold_up_the_interpreters_exit():
    program = (
        "import time\n"
        "from rewardlab.envs.base import EpisodeState\n"
        "from rewardlab.envs.tools import FunctionTool\n"
        "from rewardlab.types import Record\n"
        "tool = FunctionTool(lambda x: time.sleep(60), name='stuck')\n"
        "print(tool.run([(EpisodeState(Record()), {'x': 1})], 0.1)[0].error)\n"
    )
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=30)
    assert done.stdout.strip() == "timeout", done.stderr
    assert time.monotonic() - t0 < 15


def test_build_tool_from_a_module_path():
    tool = build_tool("os.path:basename")
    assert isinstance(tool, FunctionTool) and tool.name == "basename"
    assert tool.run([(episode(), {"p": "/a/b/c.txt"})], 1.0)[0].output == "c.txt"
    assert build_tool("rewardlab.envs.tools:CalculatorTool").name == "calculator"
    assert isinstance(build_tool("calculator"), CalculatorTool)
    assert build_tool(lookup, {"name": "weather"}).name == "weather"
    with pytest.raises(TypeError):
        build_tool(42)
    env = ToolEnv(["os.path:basename"], formats=["tag"], tool_options={"os.path:basename": {"name": "base"}})
    assert step_one(env, episode(), "<base>/x/y.py</base>").observation == "y.py"


# ----------------------------------------------------------------------------------------------------------
# ToolEnv.step
# ----------------------------------------------------------------------------------------------------------
def recording_tool():
    calls = []

    def record(value: str) -> str:
        calls.append(value)
        return f"got {value}"

    return FunctionTool(record), calls


def call_json(name: str, **arguments) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def test_a_turn_without_a_call_is_the_answer():
    tool, calls = recording_tool()
    env = ToolEnv([tool])
    ep = env.reset(Record(prompt="q"))
    result = step_one(env, ep, "The answer is 42.")
    assert result.done and result.end == END_ANSWER and result.observation is None
    assert env.answer(ep) == "The answer is 42." and calls == [] and ep.tool_calls == 0


def test_last_turn_with_a_call_ends_without_running_it():
    tool, calls = recording_tool()
    env = ToolEnv([tool])
    ep = env.reset(Record())
    result = step_one(env, ep, call_json("record", value="x"), last=True)
    assert result.done and result.end == END_MAX_TURNS
    assert calls == []
    # the same turn when it is not the last runs the tool
    result = step_one(env, ep, call_json("record", value="x"))
    assert not result.done and result.observation == "got x" and calls == ["x"]
    # a last turn without a call is still the answer
    result = step_one(env, ep, "done", last=True)
    assert result.done and result.end == END_ANSWER


def test_malformed_unknown_and_too_many_calls_are_observations():
    tool, calls = recording_tool()
    env = ToolEnv([tool], formats=["tool_call"], max_calls_per_turn=2)
    ep = env.reset(Record())
    result = step_one(env, ep, "<tool_call>{oops</tool_call>")
    assert not result.done and result.observation.startswith("error: the call is not valid JSON")
    assert ep.tool_errors == {"malformed": 1}
    result = step_one(env, ep, call_json("search", q="x"))
    assert "unknown tool 'search'" in result.observation and "record" in result.observation
    assert ep.tool_errors == {"malformed": 1, "unknown_tool": 1}
    text = "".join(call_json("record", value=str(i)) for i in range(4))
    result = step_one(env, ep, text)
    assert calls == ["0", "1"]
    assert result.observation.count("at most 2 calls per turn") == 2
    assert ep.tool_errors == {"malformed": 1, "unknown_tool": 1, "too_many_calls": 2}
    assert ep.tool_calls == 1 + 1 + 4


def test_several_calls_are_joined_in_order():
    tool, calls = recording_tool()
    env = ToolEnv([tool, "calculator"], formats=["tool_call", "tag"])
    ep = env.reset(Record())
    text = call_json("record", value="a") + " <calculator>2*21</calculator> " + call_json("nope")
    result = step_one(env, ep, text)
    assert result.observation == (
        "[record 1]\ngot a\n[calculator 2]\n42\n[nope 3]\nerror: unknown tool 'nope' (tools: calculator, record)"
    )
    assert ep.tool_calls == 3 and ep.tool_errors == {"unknown_tool": 1} and calls == ["a"]


def test_a_batch_of_episodes():
    tool, calls = recording_tool()
    env = ToolEnv([tool])
    eps = [env.reset(Record(id=i)) for i in range(3)]
    turns = [call_json("record", value="a"), "final answer", call_json("record", value="c")]
    out = env.step(eps, turns, last=False)
    assert [r.done for r in out] == [False, True, False]
    assert out[0].observation == "got a" and out[2].observation == "got c" and out[1].end == END_ANSWER
    assert sorted(calls) == ["a", "c"] and [e.tool_calls for e in eps] == [1, 0, 1]
    assert all(e.tool_seconds >= 0 for e in eps)


def test_unknown_format_is_refused():
    with pytest.raises(ValueError, match="unknown tool-call format"):
        ToolEnv(["calculator"], formats=["xml"])


# ----------------------------------------------------------------------------------------------------------
# python
# ----------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def py_env():
    env = ToolEnv(
        ["python"], formats=["fenced", "tool_call"], tool_timeout=ROOM_S, tool_options={"python": SANDBOX}
    )
    yield env
    env.close()


@pytest.fixture(scope="module")
def py_state_env():
    options = {"python": {**SANDBOX, "state": True}}
    env = ToolEnv(["python"], formats=["fenced"], tool_timeout=ROOM_S, tool_options=options)
    yield env
    env.close()


def run_python(env: ToolEnv, code: str, ep: EpisodeState | None = None):
    ep = ep or env.reset(Record())
    result = step_one(env, ep, fenced(code))
    assert not result.done
    return result.observation, ep


def test_echo_last_expression():
    assert echo_last_expression("print(1)\n") != "print(1)\n"  # a call is an expression (None: not shown)
    assert echo_last_expression("x = 1") == "x = 1"
    assert echo_last_expression("def f(:") == "def f(:"
    for code, expected in [
        ("123*456", "56088"),
        ("x = 1; x + 1", "2"),
        ("import math; math.floor(2.5)", "2"),
        ("é = 3\né * 2", "6"),
        ("a = 1\n(a +\n 1)  # two lines", "2"),
        ("'s'", "'s'"),
    ]:
        program = echo_last_expression(code)
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            exec(program, {})
        assert buffer.getvalue().strip() == expected, code


def test_python_prints_and_echoes(py_env):
    assert run_python(py_env, "print('hello')\nprint(1 + 1)")[0] == "hello\n2"
    assert run_python(py_env, "123*456")[0] == "56088"
    assert run_python(py_env, "x = 6; x * 7")[0] == "42"
    assert run_python(py_env, "x = 1")[0] == "(no output)"
    assert run_python(py_env, "print('a')\nNone")[0] == "a"


def test_python_exception_is_an_observation(py_env):
    observation, ep = run_python(py_env, "print('before')\n1/0")
    assert observation.startswith("before\n")
    assert observation.splitlines()[-1] == "ZeroDivisionError: division by zero"
    assert len(observation.splitlines()) <= 4  # stdout, then the last lines of the traceback
    assert ep.tool_errors == {"exception": 1}
    observation, ep = run_python(py_env, "def f(:\n    pass")
    assert "SyntaxError" in observation and ep.tool_errors == {"exception": 1}
    observation, ep = run_python(py_env, "import sys; sys.exit(3)")
    assert observation == "exit code 3" and ep.tool_errors == {"exception": 1}


def test_python_bad_arguments(py_env):
    ep = py_env.reset(Record())
    result = step_one(py_env, ep, call_json("python", source=5))
    assert "needs a string argument 'code'" in result.observation and ep.tool_errors == {"bad_arguments": 1}
    result = step_one(py_env, ep, call_json("python", code="print(7)"))
    assert result.observation == "7"


def test_python_batch_of_episodes(py_env):
    eps = [py_env.reset(Record(id=i)) for i in range(3)]
    turns = [fenced(f"print({i} * 10)") for i in range(3)]
    out = py_env.step(eps, turns, last=False)
    assert [r.observation for r in out] == ["0", "10", "20"]
    assert [e.tool_calls for e in eps] == [1, 1, 1]


def test_python_without_state_starts_from_nothing(py_env):
    _, ep = run_python(py_env, "secret = 41")
    observation, ep = run_python(py_env, "secret + 1", ep)
    assert observation.splitlines()[-1] == "NameError: name 'secret' is not defined"
    assert "python_cells" not in ep.data


def test_python_state_keeps_names_within_an_episode(py_state_env):
    env = py_state_env
    a, b = env.reset(Record(id="a")), env.reset(Record(id="b"))
    assert run_python(env, "secret = 41\nprint('set')", a)[0] == "set"
    assert run_python(env, "secret + 1", a)[0] == "42"  # earlier cells re-run silently: 'set' not repeated
    observation, _ = run_python(env, "secret + 1", b)
    assert observation.splitlines()[-1] == "NameError: name 'secret' is not defined"
    # a failed cell is not replayed; the episode's state is as before it
    assert "ZeroDivisionError" in run_python(env, "secret = 0\n1/0", a)[0]
    assert run_python(env, "secret", a)[0] == "41"
    assert len(a.data["python_cells"]) == 3


def test_python_state_calls_of_one_turn_run_in_order(py_state_env):
    ep = py_state_env.reset(Record())
    text = fenced("x = 20") + "and then\n" + fenced("x * 2 + 2")
    result = step_one(py_state_env, ep, text)
    assert result.observation == "[python 1]\n(no output)\n[python 2]\n42"
    assert not ep.tool_errors


def test_python_state_survives_a_cell_that_exits(py_state_env):
    ep = py_state_env.reset(Record())
    assert run_python(py_state_env, "y = 5\nprint('bye')\nimport sys; sys.exit(0)", ep)[0] == "bye"
    assert run_python(py_state_env, "print(y * 2)", ep)[0] == "10"


# ----------------------------------------------------------------------------------------------------------
# sql
# ----------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sql_env():
    env = ToolEnv(["sql"], formats=["fenced", "tool_call"], tool_timeout=ROOM_S)
    yield env
    env.close()


def run_sql(env: ToolEnv, query: str, reference=SQL_REFERENCE, metadata=None):
    ep = env.reset(Record(reference=reference, metadata=metadata or {}))
    result = step_one(env, ep, fenced(query, "sql"))
    assert not result.done
    return result.observation, ep


def test_sql_rows_as_a_table(sql_env):
    observation, ep = run_sql(sql_env, "SELECT name, age FROM singer WHERE age > 30 ORDER BY age;")
    assert observation == "name | age\nAnn | 31\nBob | 45"
    assert not ep.tool_errors and ep.tool_calls == 1
    assert run_sql(sql_env, "SELECT name FROM singer WHERE age > 99")[0] == "name\n(no rows)"
    # the reference as a JSON string (a parquet/CSV column) names the same database
    assert run_sql(sql_env, "SELECT count(*) AS n FROM singer", json.dumps(SQL_REFERENCE))[0] == "n\n3"


def test_sql_rows_shown_are_bounded():
    tool = SQLTool(max_rows_shown=2)
    ep = episode(Record(reference=SQL_REFERENCE))
    result = tool.run([(ep, {"query": "SELECT id FROM singer ORDER BY id"})], 5.0)[0]
    assert result.output == "id\n1\n2\n... (1 more rows)"
    tool.close()


def test_sql_errors_are_observations(sql_env):
    observation, ep = run_sql(sql_env, "SELEC name FROM singer")
    assert observation.startswith("error: ") and "syntax error" in observation
    assert list(ep.tool_errors) == ["sql_syntax"]
    observation, ep = run_sql(sql_env, "SELECT nope FROM singer")
    assert "no such column" in observation and list(ep.tool_errors)[0].startswith("sql_")
    observation, ep = run_sql(sql_env, "SELECT 1", reference="SELECT 1")
    assert observation.startswith("error: no database") and ep.tool_errors == {"no_database": 1}
    observation, ep = run_sql(sql_env, "SELECT 1", reference={"query": "q", "db": "/no/such/db.sqlite"})
    assert ep.tool_errors == {"no_database": 1}
    # a broken setup script is the task's fault: an observation, never an exception
    observation, ep = run_sql(sql_env, "SELECT 1", reference={"query": "q", "setup_sql": "CREATE TABLE t("})
    assert observation.startswith("error: ") and list(ep.tool_errors)[0].startswith("sql_")
    ep = sql_env.reset(Record(reference=SQL_REFERENCE))
    result = step_one(sql_env, ep, call_json("sql", query=["SELECT 1"]))
    assert ep.tool_errors == {"bad_arguments": 1} and "needs a string argument" in result.observation


def test_sql_database_of_a_file(sql_env, tmp_path):
    path = tmp_path / "music.sqlite"
    with sqlite3.connect(path) as conn:
        conn.executescript(SETUP_SQL)
    conn.close()
    assert os.path.getsize(path) > 0
    observation, _ = run_sql(
        sql_env, "SELECT max(age) AS oldest FROM singer", {"query": "q", "db": str(path)}
    )
    assert observation == "oldest\n45"
    observation, _ = run_sql(sql_env, "SELECT count(*) FROM singer", "q", metadata={"db_path": str(path)})
    assert observation.endswith("\n3")
