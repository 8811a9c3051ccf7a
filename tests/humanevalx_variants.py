"""Deliberately broken HumanEval-X solutions, for the code verifier's tests (tests/test_code_languages.py).

`broken_solution` returns the canonical solution with an early return of the return type's zero value at
the top of the function body: it must still compile, and a sound test suite must reject it.
"""

from __future__ import annotations

import re

LANGUAGES = ("cpp", "java", "js", "go", "rust")

_ALIASES = {"javascript": "js", "c++": "cpp"}


def _lang(language: str) -> str:
    lang = language.lower()
    lang = _ALIASES.get(lang, lang)
    if lang not in LANGUAGES:
        raise ValueError(f"unsupported HumanEval-X language: {language!r}")
    return lang


def _java_zero(return_type: str) -> str:
    t = return_type.strip()
    if t in ("int", "long", "short", "byte"):
        return "0"
    if t in ("double", "float"):
        return "0.0"
    if t == "boolean":
        return "false"
    if t == "char":
        return "'\\0'"
    if t.startswith("Optional"):
        return "Optional.empty()"
    return "null"


def _split_top_level(text: str, sep: str = ",") -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur)
    return [p.strip() for p in parts]


def _go_result_types(prompt: str) -> list[str]:
    """The result types of the last top-level ``func`` declared in a Go prompt."""
    start = max(prompt.rfind("\nfunc "), -1) + 1
    head = prompt[start:]
    open_paren = head.index("(")
    depth = 0
    for i in range(open_paren, len(head)):
        depth += {"(": 1, ")": -1}.get(head[i], 0)
        if depth == 0:
            break
    results = head[i + 1 : head.rindex("{")].strip()
    if not results:
        return []
    if not results.startswith("("):
        return [results]
    types = []
    for part in _split_top_level(results[1:-1]):
        # "name T" or just "T"; a type never contains a top-level space before its first bracket.
        pieces = part.split(None, 1)
        types.append(pieces[1] if len(pieces) == 2 and re.match(r"^[A-Za-z_]\w*$", pieces[0]) else part)
    return types


def _rust_return_type(declaration: str) -> str:
    last = declaration.rstrip().splitlines()[-1]
    match = re.search(r"->\s*(.*?)\s*\{\s*$", last)
    return match.group(1) if match else "()"


def _early_return(lang: str, record: dict) -> str:
    if lang == "cpp":
        return "    return {};\n"
    if lang == "js":
        return "  return undefined;\n"
    if lang == "java":
        sigs = re.findall(
            r"public\s+(?:static\s+)?([\w<>\[\],.? ]+?)\s+\w+\s*\([^)]*\)\s*(?:throws\s+[\w., ]+)?\{",
            record["prompt"],
        )
        return f"        if (true) return {_java_zero(sigs[-1])};\n"
    if lang == "go":
        types = _go_result_types(record["prompt"])
        if not types:
            return "    return\n"
        decls = "".join(f"    var zeroRet{i}_ {t}\n" for i, t in enumerate(types))
        return decls + "    return " + ", ".join(f"zeroRet{i}_" for i in range(len(types))) + "\n"
    # rust
    rtype = _rust_return_type(record["declaration"])
    if rtype == "()":
        return "    return;\n"
    if rtype.startswith("RtnType"):  # Rust/137: a user enum without Default
        return "    return RtnType::Empty();\n"
    return "    return Default::default();\n"


def broken_solution(language: str, record: dict) -> str:
    """The canonical solution with an early return of the return type's zero value inserted first."""
    lang = _lang(language)
    return _early_return(lang, record) + record["canonical_solution"]
