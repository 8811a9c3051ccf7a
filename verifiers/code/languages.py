"""The languages the code verifier runs besides Python: one class each, found by name or fence label.

A language says how a program becomes something the sandbox runs: the source file's name, the compiler's
command and the files it leaves (compiled once per distinct program, ``programs.py``), the command that
runs the result, and the environment both need. Two kinds of program:

* a **stdio** program: the completion alone, run once per case on its stdin;
* a **test** program: the function head, the completion and the benchmark's test code in one file, as
  HumanEval-X's and MultiPL-E's harnesses build it. It passes when it exits with 0 *and* prints a line that
  only the end of the tests prints (:attr:`Program.done`): a solution that exits early (``exit(0)`` in a
  static initialiser, ``System.exit(0)``, ``process.exit(0)``) never reaches it. Go and Rust run their test
  harnesses, which print their own summary line last (``PASS``, ``test result: ok.``).

Toolchains are Debian's (``scripts/_toolchains.sh``); a missing one is named with the package to install.
Memory: the sandbox limits commands with ``RLIMIT_DATA`` (not ``RLIMIT_AS``, which JIT and threaded
runtimes exceed by reservation alone), and the JVM and node also get their own heap flag of the same size.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from typing import ClassVar

TOOLCHAINS = os.environ.get("REWARDLAB_TOOLCHAINS", "/usr/local/lib/rewardlab-toolchains")
"""What ``scripts/_toolchains.sh`` builds once for the sandboxed compilers (Rust crates): under ``/usr``,
so that the sandbox's read-only root shows it."""


@dataclass
class Program:
    """One program ready for the sandbox: how to compile it (if at all) and how to run the result."""

    source: str
    """The source file's name in the working directory."""
    text: str
    compile: list[str] | None = None
    """The compiler's command, run in the working directory holding the source; ``None``: interpreted."""
    artifacts: tuple[str, ...] = ()
    """Names or patterns of the compiler's output files that the run needs."""
    run: list[str] = field(default_factory=list)
    executable: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    done: str | None = None
    """Test programs: a line of stdout that proves the tests ran to their end."""
    limits: dict[str, float] = field(default_factory=dict)
    """Limits of the run over the sandbox's (``as_mb``: native code's address space)."""


class Language:
    """One language: its names, toolchain and program shapes (subclasses fill the class attributes)."""

    name: ClassVar[str]
    fences: ClassVar[tuple[str, ...]]
    """Fence labels and record names meaning this language (lower case)."""
    commands: ClassVar[dict[str, str]]
    """Commands the toolchain needs, each with the Debian package that brings it."""
    source: ClassVar[str]
    entry_pattern: ClassVar[str] = ""
    """How a definition of the entry point looks (``{name}`` replaced), to tell a whole solution from a
    body that continues the prompt."""
    header_pattern: ClassVar[str] = r"^\s*(#include|import\b|using\b|package\b|use\b|extern crate\b)"
    """Lines of a prompt that a whole solution needs too (includes, imports)."""
    test_prelude: ClassVar[str] = ""
    """Code put between the completion and the test code (JavaScript: an ``assert`` that throws)."""
    address_space_mb: ClassVar[int | None] = None
    """Native code: an RLIMIT_AS of the memory limit plus this many MiB (the runtime's own reservations),
    because shared mappings count in RLIMIT_AS and not in RLIMIT_DATA. ``None`` for JIT runtimes (the
    JVM, node), which reserve gigabytes and cannot map shared memory without native code."""

    def heap_mb(self, memory_mb: int) -> int:
        """A runtime's own heap flag: three quarters of the memory limit, and at least 256 MiB below it
        (the runtime's code, stacks and metadata), so that a full heap is the runtime's clean error (an
        OutOfMemoryError), not a refused allocation that crashes it."""
        memory_mb = memory_mb or 4096
        return max(64, min(memory_mb * 3 // 4, memory_mb - 256))

    def stdio_program(self, code: str, memory_mb: int) -> Program:
        """:meth:`stdio` under the memory limit ``memory_mb`` (heap flag and run limits derived)."""
        return self._limited(self.stdio(code, self.heap_mb(memory_mb)), memory_mb)

    def test_program(self, text: str, done: str, memory_mb: int) -> Program:
        """:meth:`tests` under the memory limit ``memory_mb`` (heap flag and run limits derived)."""
        return self._limited(self.tests(text, done, self.heap_mb(memory_mb)), memory_mb)

    def _limited(self, program: Program, memory_mb: int) -> Program:
        """``program`` with the run's own limits: native code's address space (see
        :attr:`address_space_mb`)."""
        if self.address_space_mb is not None and memory_mb:
            program.limits["as_mb"] = memory_mb + self.address_space_mb
        return program

    def missing(self) -> str | None:
        """Why this language cannot run here (a command to install), or ``None``."""
        for command, package in self.commands.items():
            if not shutil.which(command, path="/usr/local/bin:/usr/bin:/bin"):
                return f"toolchain missing: {command} (apt-get install {package}; scripts/_toolchains.sh)"
        return None

    def stdio(self, code: str, heap_mb: int) -> Program:
        """The completion as a program reading stdin (``heap_mb``: a runtime's heap flag, :meth:`heap_mb`)."""
        raise NotImplementedError

    def tests(self, text: str, done: str, heap_mb: int) -> Program:
        """A test program (function head, completion, tests) that prints ``done`` once its tests pass."""
        raise NotImplementedError

    def defines(self, code: str, entry_point: str) -> bool:
        pattern = self.entry_pattern.replace("{name}", re.escape(entry_point))
        return bool(pattern) and re.search(pattern, code, re.MULTILINE) is not None

    def header(self, prompt: str) -> str:
        """The prompt's include and import lines."""
        lines = [line for line in prompt.splitlines() if re.match(self.header_pattern, line)]
        return "\n".join(lines) + ("\n" if lines else "")


def _c_main_wrapper(done: str) -> str:
    """Runs the test code's ``main`` (renamed) and prints ``done`` when it returned 0."""
    return (
        "\n#undef main\n#include <stdio.h>\n"
        "int main(void) {\n  int rc = rk_tests_main();\n  fflush(stdout);\n"
        f'  if (rc == 0) {{ fputs("\\n{done}\\n", stdout); fflush(stdout); }}\n  return rc;\n}}\n'
    )


class C(Language):
    name = "c"
    fences = ("c", "h")
    address_space_mb = 64
    commands: ClassVar[dict[str, str]] = {"gcc": "gcc"}
    source = "main.c"
    compiler: ClassVar[list[str]] = ["gcc", "-O2", "-std=gnu11", "-o", "main", "main.c", "-lm"]
    entry_pattern = r"^[\w\s\*]*\b{name}\s*\([^;]*\)\s*\{"

    def _compiler(self, text: str) -> list[str]:
        # OpenSSL's libcrypto where the program includes it (HumanEval-X's CPP/162: MD5)
        return [*self.compiler, "-lcrypto"] if "openssl/" in text else list(self.compiler)

    def stdio(self, code: str, heap_mb: int) -> Program:
        return Program(self.source, code, self._compiler(code), ("main",), ["./main"], ("main",))

    def tests(self, text: str, done: str, heap_mb: int) -> Program:
        body = _rename_main(text) + _c_main_wrapper(done)
        return Program(self.source, body, self._compiler(body), ("main",), ["./main"], ("main",), done=done)


def _rename_main(text: str) -> str:
    """The test code's ``main`` becomes ``rk_tests_main`` (a macro from the first ``main`` on, so that the
    completion's own code above it is untouched), with a ``return 0;`` at its end: a C++ ``main`` may
    end without one, and any other function must not (its value would be undefined)."""
    at = re.search(r"^\s*int\s+main\s*\(", text, re.MULTILINE)
    if at is None:
        return text
    end = _closing_brace(text, text.find("{", at.end()))
    if end is not None:
        text = text[:end] + "  return 0;\n" + text[end:]
    return text[: at.start()] + "\n#define main rk_tests_main\n" + text[at.start() :]


def _closing_brace(text: str, start: int) -> int | None:
    """Where the brace opened at ``start`` closes, skipping string and character literals and comments."""
    if start < 0:
        return None
    depth, i = 0, start
    while i < len(text):
        two = text[i : i + 2]
        if two == "//":
            i = text.find("\n", i)
            i = len(text) if i < 0 else i
        elif two == "/*":
            i = text.find("*/", i + 2)
            i = len(text) if i < 0 else i + 1
        elif text[i] in "\"'":
            quote, i = text[i], i + 1
            while i < len(text) and text[i] != quote:
                i += 2 if text[i] == "\\" else 1
        elif text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return None


class Cpp(C):
    name = "cpp"
    fences = ("cpp", "c++", "cxx", "cc", "hpp")
    commands: ClassVar[dict[str, str]] = {"g++": "g++"}
    source = "main.cpp"
    # -I: the precompiled <bits/stdc++.h> of scripts/_toolchains.sh, made for exactly these flags
    compiler: ClassVar[list[str]] = [
        "g++",
        "-O2",
        "-std=gnu++17",
        "-I",
        f"{TOOLCHAINS}/cxx/include",
        "-o",
        "main",
        "main.cpp",
        "-lcrypto",
    ]
    entry_pattern = r"^[\w\s\*&:<>,]*\b{name}\s*\([^;]*\)\s*(const\s*)?\{"


JDK = "/usr/lib/jvm/java-17-openjdk-amd64/bin"
"""Debian's JDK 17 by its own path: a machine may have other JDKs first in ``/usr/bin``'s alternatives."""


class Java(Language):
    name = "java"
    fences = ("java",)
    commands: ClassVar[dict[str, str]] = {
        f"{JDK}/javac": "openjdk-17-jdk-headless",
        f"{JDK}/java": "openjdk-17-jdk-headless",
    }
    source = "Main.java"
    entry_pattern = r"\b{name}\s*\([^;]*\)\s*(throws[\w\s,.]*)?\{"
    # Serial GC, C1 only, one compiler thread: few threads (RLIMIT_NPROC counts them, RLIMIT_DATA counts
    # each one's -Xss stack), a fast start for short programs; -Xms small, or the JVM commits 1/64 of the
    # machine's memory at start.
    jvm: ClassVar[list[str]] = [
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-XX:CICompilerCount=1",
        "-XX:-UsePerfData",
        "-XX:ActiveProcessorCount=1",
        "-Xms8m",
        "-Xlog:disable",  # the JVM's own warnings go to stdout by default: to stderr instead
        "-Xlog:all=warning:stderr",
    ]

    def _compile(self, source: str) -> list[str]:
        flags = [f"-J{flag}" for flag in self.jvm]
        return [f"{JDK}/javac", *flags, "-J-Xmx768m", "-encoding", "UTF-8", "-nowarn", source]

    def _run(self, heap_mb: int, main: str) -> list[str]:
        tail = ["-Xss16m", "-XX:ErrorFile=hs_err.log", "-Djava.io.tmpdir=.", "-ea", "-cp", ".", main]
        return [f"{JDK}/java", *self.jvm, f"-Xmx{heap_mb}m", *tail]

    def stdio(self, code: str, heap_mb: int) -> Program:
        found = re.search(r"public\s+(?:final\s+)?class\s+(\w+)", code)
        main = found.group(1) if found else "Main"
        return Program(
            f"{main}.java", code, self._compile(f"{main}.java"), ("*.class",), self._run(heap_mb, main)
        )

    def tests(self, text: str, done: str, heap_mb: int) -> Program:
        wrapper = (
            "\nclass RkTests {\n  public static void main(String[] args) throws Throwable {\n"
            f'    Main.main(args);\n    System.out.flush();\n    System.out.print("\\n{done}\\n");\n'
            "    System.out.flush();\n  }\n}\n"
        )
        run = self._run(heap_mb, "RkTests")
        return Program(self.source, text + wrapper, self._compile(self.source), ("*.class",), run, done=done)


class JavaScript(Language):
    name = "js"
    fences = ("js", "javascript", "node", "nodejs", "mjs")
    commands: ClassVar[dict[str, str]] = {"node": "nodejs"}
    source = "main.js"
    # HumanEval-X's tests call console.assert, which in node only prints: here it throws, and it cannot be
    # replaced after this line (nor before it without making this line throw).
    test_prelude = (
        "\n;Object.defineProperty(console, 'assert', {value: function (ok, ...rest) {\n"
        "  if (!ok) { throw new Error('Assertion failed' + (rest.length ? ': ' + rest.join(' ') : '')); }\n"
        "}, writable: false, configurable: false});\n"
    )
    entry_pattern = r"(function\s*\*?\s*{name}\s*\(|\b{name}\s*=\s*(async\s*)?(function\b|\())"

    # Debian's node modules (lodash; NodeSource's node does not look there itself) and js-md5 (HumanEval-X's
    # JavaScript/162) from scripts/_toolchains.sh; one thread per pool
    env: ClassVar[dict[str, str]] = {
        "NODE_PATH": f"/usr/share/nodejs:{TOOLCHAINS}/node",
        "UV_THREADPOOL_SIZE": "1",
    }

    def _run(self, heap_mb: int, source: str) -> list[str]:
        return ["node", f"--max-old-space-size={heap_mb}", "--v8-pool-size=1", source]

    def stdio(self, code: str, heap_mb: int) -> Program:
        return Program(self.source, code, None, (), self._run(heap_mb, self.source), env=dict(self.env))

    def tests(self, text: str, done: str, heap_mb: int) -> Program:
        body = text + f"\n;console.log('\\n{done}');\n"
        run = self._run(heap_mb, self.source)
        return Program(self.source, body, None, (), run, env=dict(self.env), done=done)


class TypeScript(JavaScript):
    name = "ts"
    fences = ("ts", "typescript")
    commands: ClassVar[dict[str, str]] = {"tsc": "node-typescript", "node": "nodejs"}
    source = "main.ts"
    # As MultiPL-E: type errors are errors (tsc exits non-zero and the run never starts).
    # MultiPL-E's `tsc --target esnext` (its default libraries: console and the DOM's types), with
    # CommonJS output so that a program's own `import ... from "fs"` runs in node as `require`.
    compiler: ClassVar[list[str]] = ["tsc", "--target", "esnext", "--module", "commonjs"]

    def _compiler(self) -> list[str]:
        # no @types/node: MultiPL-E's tests declare `require` themselves, which node's types would refuse
        return [*self.compiler, self.source]

    def stdio(self, code: str, heap_mb: int) -> Program:
        run = self._run(heap_mb, "main.js")
        return Program(self.source, code, self._compiler(), ("main.js",), run, env=dict(self.env))

    def tests(self, text: str, done: str, heap_mb: int) -> Program:
        body = text + f"\n;console.log('\\n{done}');\n"
        run = self._run(heap_mb, "main.js")
        return Program(self.source, body, self._compiler(), ("main.js",), run, env=dict(self.env), done=done)


class Go(Language):
    name = "go"
    fences = ("go", "golang")
    commands: ClassVar[dict[str, str]] = {"go": "golang-go"}
    source = "main.go"
    entry_pattern = r"^func\s+{name}\s*\("
    address_space_mb = 1024  # the runtime reserves ~600 MiB of page summaries at start
    # GOPATH mode: testify comes installed (.a files) in scripts/_toolchains.sh's GOPATH, else from
    # Debian's sources; the build cache is the program's own (its HOME), never shared between programs.
    env: ClassVar[dict[str, str]] = {
        "GO111MODULE": "off",
        "CGO_ENABLED": "1",  # as the prebuilt archives were built: otherwise 15 standard packages rebuild
        "GOFLAGS": "-p=2",
        "GOMAXPROCS": "2",
    }

    def _env(self) -> dict[str, str]:
        prebuilt = os.path.join(TOOLCHAINS, "go")
        gopath = prebuilt if os.path.isdir(os.path.join(prebuilt, "pkg")) else "/usr/share/gocode"
        return {**self.env, "GOPATH": gopath}

    def stdio(self, code: str, heap_mb: int) -> Program:
        build = ["sh", "-c", 'GOCACHE="$HOME/.gocache" exec go build -ldflags="-s -w" -o main main.go']
        return Program(self.source, code, build, ("main",), ["./main"], ("main",), self._env())

    def tests(self, text: str, done: str, heap_mb: int) -> Program:
        build = [
            "sh",
            "-c",
            'GOCACHE="$HOME/.gocache" exec go test -vet=off -ldflags="-s -w" -c -o tests main_test.go',
        ]
        # -test.paniconexit0: os.Exit(0) inside a test fails it (go test passes it too); the harness
        # prints PASS last, and nothing else prints it on its own line after the tests.
        run = ["./tests", "-test.paniconexit0", "-test.count=1"]
        return Program("main_test.go", text, build, ("tests",), run, ("tests",), self._env(), "PASS")


class Rust(Language):
    name = "rust"
    fences = ("rust", "rs")
    commands: ClassVar[dict[str, str]] = {"/usr/bin/rustc": "rustc"}  # Debian's, not a rustup one
    source = "main.rs"
    entry_pattern = r"^\s*(pub\s+)?fn\s+{name}\b"
    address_space_mb = 64
    header_pattern = r"^\s*(use\b|extern crate\b)"

    def _compiler(self, *extra: str) -> list[str]:
        options = ["-O", "-C", "codegen-units=1", "-C", "strip=debuginfo"]
        return ["/usr/bin/rustc", "--edition", "2021", *options, *_rust_externs(), *extra]

    def stdio(self, code: str, heap_mb: int) -> Program:
        return Program(
            self.source, code, self._compiler("-o", "main", "main.rs"), ("main",), ["./main"], ("main",)
        )

    def tests(self, text: str, done: str, heap_mb: int) -> Program:
        build = self._compiler("--test", "-o", "tests", "main.rs")
        run = ["./tests", "--test-threads=1"]
        return Program(self.source, text, build, ("tests",), run, ("tests",), done="test result: ok.")


def _rust_externs() -> list[str]:
    """``--extern`` flags for the crates HumanEval-X's Rust programs use (rand, regex, md5), built once
    from Debian's sources by ``scripts/_toolchains.sh``; none when they were not built."""
    listing = os.path.join(TOOLCHAINS, "rust", "externs.txt")
    try:
        with open(listing) as f:
            externs = [line.strip() for line in f if line.strip()]
    except OSError:
        return []
    flags = ["-L", f"dependency={os.path.join(TOOLCHAINS, 'rust', 'deps')}"]
    for extern in externs:
        flags += ["--extern", extern]
    return flags


LANGUAGES: dict[str, Language] = {
    lang.name: lang for lang in (C(), Cpp(), Java(), JavaScript(), TypeScript(), Go(), Rust())
}
"""The compiled and scripted languages by name (Python is the verifier's own path)."""
PYTHON_NAMES = ("python", "py", "python3", "py3")


def find_language(label: str | None) -> Language | None:
    """The language a name or fence label means (``cpp``, ``c++``, ``java``, ``js``, ``go_test.go``...);
    ``None`` for Python or an unknown label."""
    if not label:
        return None
    key = label.strip().lower()
    key = {"go_test.go": "go", "rs": "rust", "javascript": "js", "typescript": "ts"}.get(key, key)
    if key in LANGUAGES:
        return LANGUAGES[key]
    return next((lang for lang in LANGUAGES.values() if key in lang.fences), None)


__all__ = ["LANGUAGES", "PYTHON_NAMES", "Language", "Program", "find_language"]
