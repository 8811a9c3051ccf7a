"""Builds the shipped code sample (``problems.jsonl`` and ``sample.jsonl``) from the problems below.

All problems, tests and solutions here were written for rewardlab (Apache-2.0), in the style of HumanEval
(a ``check(candidate)`` test body and an entry point), MBPP (``test_list`` of asserts) and APPS /
LiveCodeBench (stdin/stdout cases). Each problem has a correct solution and one or more wrong ones
(wrong answer, exception, timeout), so that verdicts can be checked against a reference harness.

Run ``python data/code/build_sample.py`` to regenerate the JSONL files.
"""

from __future__ import annotations

import json
import os
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))


def d(s: str) -> str:
    return textwrap.dedent(s).strip("\n") + "\n"


# ------------------------------------------------------------------------------ HumanEval style (check + entry)
# (entry_point, prompt, correct body, [wrong bodies], check body)
HUMANEVAL = [
    (
        "running_max",
        'def running_max(xs: list) -> list:\n    """Maximum of each prefix of xs: running_max([1, 3, 2]) == [1, 3, 3]."""\n',
        "    out, best = [], None\n    for x in xs:\n        best = x if best is None else max(best, x)\n        out.append(best)\n    return out\n",
        ["    return sorted(xs)\n", "    return [max(xs[: i]) for i in range(len(xs))]\n"],
        "def check(candidate):\n    assert candidate([]) == []\n    assert candidate([1, 3, 2]) == [1, 3, 3]\n    assert candidate([5, 4, 6, 1]) == [5, 5, 6, 6]\n",
    ),
    (
        "is_palindrome",
        'def is_palindrome(s: str) -> bool:\n    """True when s reads the same backwards, ignoring case and non-letters."""\n',
        "    t = [c.lower() for c in s if c.isalpha()]\n    return t == t[::-1]\n",
        ["    return s == s[::-1]\n"],
        "def check(candidate):\n    assert candidate('') is True\n    assert candidate('Never odd or even') is True\n    assert candidate('abc') is False\n    assert candidate('A man, a plan, a canal: Panama') is True\n",
    ),
    (
        "mean_absolute_deviation",
        'def mean_absolute_deviation(numbers: list) -> float:\n    """Mean absolute deviation around the mean."""\n',
        "    m = sum(numbers) / len(numbers)\n    return sum(abs(x - m) for x in numbers) / len(numbers)\n",
        ["    m = sum(numbers) / len(numbers)\n    return sum(x - m for x in numbers) / len(numbers)\n"],
        "def check(candidate):\n    assert abs(candidate([1.0, 2.0, 3.0]) - 2.0 / 3.0) < 1e-6\n    assert abs(candidate([1.0, 2.0, 3.0, 4.0]) - 1.0) < 1e-6\n    assert abs(candidate([1.0, 2.0, 3.0, 4.0, 5.0]) - 6.0 / 5.0) < 1e-6\n",
    ),
    (
        "fib",
        'def fib(n: int) -> int:\n    """The n-th Fibonacci number, fib(1) == 1, fib(2) == 1."""\n',
        "    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n",
        [
            "    if n <= 2:\n        return 1\n    return fib(n - 1) + fib(n - 2)\n",
            "    a, b = 1, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n",
        ],
        "def check(candidate):\n    assert candidate(10) == 55\n    assert candidate(1) == 1\n    assert candidate(8) == 21\n    assert candidate(11) == 89\n    assert candidate(60) == 1548008755920\n",
    ),
    (
        "below_zero",
        'def below_zero(operations: list) -> bool:\n    """True if a balance starting at 0 ever falls below zero."""\n',
        "    balance = 0\n    for op in operations:\n        balance += op\n        if balance < 0:\n            return True\n    return False\n",
        ["    return sum(operations) < 0\n"],
        "def check(candidate):\n    assert candidate([]) is False\n    assert candidate([1, 2, -3, 1, 2, -3]) is False\n    assert candidate([1, 2, -4, 5, 6]) is True\n    assert candidate([1, -1, 2, -2, 5, -5, 4, -5]) is True\n",
    ),
    (
        "parse_nested_parens",
        'def parse_nested_parens(paren_string: str) -> list:\n    """Deepest nesting of each space-separated group of parentheses."""\n',
        "    out = []\n    for group in paren_string.split():\n        depth = best = 0\n        for c in group:\n            depth += 1 if c == '(' else -1\n            best = max(best, depth)\n        out.append(best)\n    return out\n",
        ["    return [g.count('(') for g in paren_string.split()]\n"],
        "def check(candidate):\n    assert candidate('(()()) ((())) () ((())()())') == [2, 3, 1, 3]\n    assert candidate('() (()) ((())) (((())))') == [1, 2, 3, 4]\n    assert candidate('(()(())((())))') == [4]\n",
    ),
    (
        "unique_sorted",
        'def unique_sorted(xs: list) -> list:\n    """Sorted unique elements of xs."""\n',
        "    return sorted(set(xs))\n",
        [
            "    return sorted(xs)\n",
            "    out = []\n    for x in xs:\n        if x not in out:\n            out.append(x)\n    return out\n",
        ],
        "def check(candidate):\n    assert candidate([5, 3, 5, 2, 3, 3, 9, 0, 123]) == [0, 2, 3, 5, 9, 123]\n    assert candidate([]) == []\n    assert candidate([3, 1, 2]) == [1, 2, 3]\n",
    ),
    (
        "count_vowels",
        'def count_vowels(s: str) -> int:\n    """Number of vowels (a, e, i, o, u, either case) in s; y counts at the end of the word."""\n',
        "    n = sum(c in 'aeiouAEIOU' for c in s)\n    if s and s[-1] in 'yY':\n        n += 1\n    return n\n",
        ["    return sum(c in 'aeiou' for c in s)\n"],
        "def check(candidate):\n    assert candidate('abcde') == 2\n    assert candidate('Alone') == 3\n    assert candidate('key') == 2\n    assert candidate('bye') == 1\n    assert candidate('ACEDY') == 3\n",
    ),
    (
        "rolling_sum",
        'def rolling_sum(xs: list, k: int) -> list:\n    """Sums of every window of k consecutive elements."""\n',
        "    return [sum(xs[i : i + k]) for i in range(len(xs) - k + 1)]\n",
        ["    return [sum(xs[i : i + k]) for i in range(len(xs) - k)]\n", "    raise NotImplementedError\n"],
        "def check(candidate):\n    assert candidate([1, 2, 3, 4], 2) == [3, 5, 7]\n    assert candidate([1, 2, 3], 3) == [6]\n    assert candidate([4], 1) == [4]\n",
    ),
    (
        "words_string",
        'def words_string(s: str) -> list:\n    """Split s into words separated by commas or spaces."""\n',
        "    return s.replace(',', ' ').split()\n",
        ["    return s.split(', ')\n"],
        "def check(candidate):\n    assert candidate('Hi, my name is John') == ['Hi', 'my', 'name', 'is', 'John']\n    assert candidate('One, two, three') == ['One', 'two', 'three']\n    assert candidate('') == []\n    assert candidate('ahmed     , gamal') == ['ahmed', 'gamal']\n",
    ),
    (
        "prime_factors",
        'def prime_factors(n: int) -> list:\n    """Prime factors of n in increasing order, with multiplicity."""\n',
        "    out, p = [], 2\n    while p * p <= n:\n        while n % p == 0:\n            out.append(p)\n            n //= p\n        p += 1\n    if n > 1:\n        out.append(n)\n    return out\n",
        [
            "    out, p = [], 2\n    while n > 1:\n        if n % p == 0:\n            out.append(p)\n        p += 1\n    return out\n"
        ],
        "def check(candidate):\n    assert candidate(2) == [2]\n    assert candidate(8) == [2, 2, 2]\n    assert candidate(57) == [3, 19]\n    assert candidate(3 * 19 * 19) == [3, 19, 19]\n",
    ),
    (
        "sort_by_bits",
        'def sort_by_bits(arr: list) -> list:\n    """Sort non-negative ints by number of ones in binary, then by value."""\n',
        "    return sorted(arr, key=lambda x: (bin(x).count('1'), x))\n",
        ["    return sorted(arr, key=lambda x: bin(x).count('1'))\n"],
        "def check(candidate):\n    assert candidate([1, 5, 2, 3, 4]) == [1, 2, 4, 3, 5]\n    assert candidate([0, 1, 2, 3, 4]) == [0, 1, 2, 4, 3]\n    assert candidate([7, 6, 5, 3]) == [3, 5, 6, 7]\n",
    ),
    (
        "circular_shift",
        'def circular_shift(x: int, shift: int) -> str:\n    """Shift the digits of x right by shift; if shift > number of digits, return the digits reversed."""\n',
        "    s = str(x)\n    if shift > len(s):\n        return s[::-1]\n    return s[len(s) - shift :] + s[: len(s) - shift]\n",
        ["    s = str(x)\n    return s[-shift:] + s[:-shift]\n"],
        "def check(candidate):\n    assert candidate(100, 2) == '001'\n    assert candidate(12, 2) == '12'\n    assert candidate(97, 8) == '79'\n    assert candidate(12, 1) == '21'\n",
    ),
    (
        "pair_sum_zero",
        'def pair_sum_zero(xs: list) -> bool:\n    """True if two distinct elements sum to zero."""\n',
        "    seen = set()\n    for x in xs:\n        if -x in seen:\n            return True\n        seen.add(x)\n    return False\n",
        ["    return any(-x in xs for x in xs)\n"],
        "def check(candidate):\n    assert candidate([1, 3, 5, 0]) is False\n    assert candidate([2, 4, -5, 3, 5, 7]) is True\n    assert candidate([1]) is False\n    assert candidate([0, 0]) is True\n",
    ),
    (
        "collatz_steps",
        'def collatz_steps(n: int) -> int:\n    """Steps for the Collatz sequence from n to reach 1."""\n',
        "    steps = 0\n    while n != 1:\n        n = n // 2 if n % 2 == 0 else 3 * n + 1\n        steps += 1\n    return steps\n",
        [
            "    steps = 0\n    while n != 1:\n        n = n // 2 if n % 2 == 0 else 3 * n - 1\n        steps += 1\n    return steps\n"
        ],
        "def check(candidate):\n    assert candidate(1) == 0\n    assert candidate(6) == 8\n    assert candidate(27) == 111\n",
    ),
]

# ----------------------------------------------------------------------------------- MBPP style (test_list)
# (entry_point, description, correct, [wrong], test_list)
MBPP = [
    (
        "remove_char",
        "Remove every occurrence of a character from a string.",
        "def remove_char(s, c):\n    return s.replace(c, '')\n",
        ["def remove_char(s, c):\n    return s.replace(c, '', 1)\n"],
        [
            "assert remove_char('hello', 'l') == 'heo'",
            "assert remove_char('abcda', 'a') == 'bcd'",
            "assert remove_char('PHP', 'P') == 'H'",
        ],
    ),
    (
        "max_sub_sum",
        "Largest sum of a contiguous subarray.",
        "def max_sub_sum(a):\n    best = cur = a[0]\n    for x in a[1:]:\n        cur = max(x, cur + x)\n        best = max(best, cur)\n    return best\n",
        ["def max_sub_sum(a):\n    return sum(x for x in a if x > 0)\n"],
        [
            "assert max_sub_sum([-2, -3, 4, -1, -2, 1, 5, -3]) == 7",
            "assert max_sub_sum([-3, -4, 5, -2, -3, 2, 6, -4]) == 8",
            "assert max_sub_sum([-4, -5]) == -4",
        ],
    ),
    (
        "is_not_prime",
        "Whether a number is not prime.",
        "import math\ndef is_not_prime(n):\n    if n < 2:\n        return True\n    for i in range(2, int(math.isqrt(n)) + 1):\n        if n % i == 0:\n            return True\n    return False\n",
        ["def is_not_prime(n):\n    return n % 2 == 0\n"],
        [
            "assert is_not_prime(2) == False",
            "assert is_not_prime(10) == True",
            "assert is_not_prime(35) == True",
            "assert is_not_prime(37) == False",
        ],
    ),
    (
        "heap_largest",
        "The n largest integers of a list, largest first.",
        "import heapq\ndef heap_largest(nums, n):\n    return heapq.nlargest(n, nums)\n",
        ["def heap_largest(nums, n):\n    return sorted(nums)[-n:]\n"],
        [
            "assert heap_largest([25, 35, 22, 85, 14, 65, 75, 22, 58], 3) == [85, 75, 65]",
            "assert heap_largest([25, 35, 22, 85, 14, 65, 75, 22, 58], 2) == [85, 75]",
        ],
    ),
    (
        "similar_elements",
        "Shared elements of two tuples, as a sorted tuple.",
        "def similar_elements(a, b):\n    return tuple(sorted(set(a) & set(b)))\n",
        ["def similar_elements(a, b):\n    return set(a) & set(b)\n"],
        [
            "assert similar_elements((3, 4, 5, 6), (5, 7, 4, 10)) == (4, 5)",
            "assert similar_elements((1, 2, 3, 4), (5, 4, 3, 7)) == (3, 4)",
            "assert similar_elements((11, 12, 14, 13), (17, 15, 14, 13)) == (13, 14)",
        ],
    ),
    (
        "count_ways",
        "Number of ways to climb n stairs taking 1 or 2 steps.",
        "def count_ways(n):\n    a, b = 1, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n",
        ["def count_ways(n):\n    return 2 ** (n - 1)\n"],
        ["assert count_ways(1) == 1", "assert count_ways(4) == 5", "assert count_ways(10) == 89"],
    ),
    (
        "word_lengths",
        "Map each word to its length.",
        "def word_lengths(words):\n    return {w: len(w) for w in words}\n",
        ["def word_lengths(words):\n    return [len(w) for w in words]\n"],
        ["assert word_lengths(['ab', 'cde']) == {'ab': 2, 'cde': 3}", "assert word_lengths([]) == {}"],
    ),
    (
        "second_smallest",
        "Second smallest distinct number, or None.",
        "def second_smallest(xs):\n    u = sorted(set(xs))\n    return u[1] if len(u) > 1 else None\n",
        ["def second_smallest(xs):\n    return sorted(xs)[1]\n"],
        [
            "assert second_smallest([1, 2, -8, -2, 0, -2]) == -2",
            "assert second_smallest([1, 1, -0.5, 0, 2, -2, -2]) == -0.5",
            "assert second_smallest([2, 2]) == None",
        ],
    ),
    (
        "flatten",
        "Flatten a nested list.",
        "def flatten(xs):\n    out = []\n    for x in xs:\n        if isinstance(x, list):\n            out.extend(flatten(x))\n        else:\n            out.append(x)\n    return out\n",
        ["def flatten(xs):\n    return [y for x in xs for y in (x if isinstance(x, list) else [x])]\n"],
        [
            "assert flatten([0, 10, [20, 30], 40, [50, [60, 70, 80]]]) == [0, 10, 20, 30, 40, 50, 60, 70, 80]",
            "assert flatten([[1, 2], [3]]) == [1, 2, 3]",
        ],
    ),
    (
        "gcd_list",
        "Greatest common divisor of a list.",
        "import math\nfrom functools import reduce\ndef gcd_list(xs):\n    return reduce(math.gcd, xs)\n",
        ["def gcd_list(xs):\n    return min(xs)\n"],
        [
            "assert gcd_list([12, 18, 24]) == 6",
            "assert gcd_list([7, 14]) == 7",
            "assert gcd_list([9, 6, 4]) == 1",
        ],
    ),
    (
        "rotate_left",
        "Rotate a list left by k.",
        "def rotate_left(xs, k):\n    if not xs:\n        return []\n    k %= len(xs)\n    return xs[k:] + xs[:k]\n",
        ["def rotate_left(xs, k):\n    return xs[k:] + xs[:k]\n"],
        [
            "assert rotate_left([1, 2, 3, 4, 5], 2) == [3, 4, 5, 1, 2]",
            "assert rotate_left([1, 2, 3], 4) == [2, 3, 1]",
            "assert rotate_left([], 3) == []",
        ],
    ),
    (
        "char_freq",
        "Count each character of a string.",
        "from collections import Counter\ndef char_freq(s):\n    return dict(Counter(s))\n",
        ["def char_freq(s):\n    return {c: 1 for c in s}\n"],
        ["assert char_freq('aab') == {'a': 2, 'b': 1}", "assert char_freq('') == {}"],
    ),
    (
        "binary_search",
        "Index of x in a sorted list, or -1.",
        "def binary_search(a, x):\n    lo, hi = 0, len(a) - 1\n    while lo <= hi:\n        mid = (lo + hi) // 2\n        if a[mid] == x:\n            return mid\n        if a[mid] < x:\n            lo = mid + 1\n        else:\n            hi = mid - 1\n    return -1\n",
        [
            "def binary_search(a, x):\n    lo, hi = 0, len(a) - 1\n    while lo <= hi:\n        mid = (lo + hi) // 2\n        if a[mid] == x:\n            return mid\n        if a[mid] < x:\n            lo = mid\n        else:\n            hi = mid - 1\n    return -1\n"
        ],
        [
            "assert binary_search([1, 3, 5, 7, 9], 7) == 3",
            "assert binary_search([1, 3, 5, 7, 9], 1) == 0",
            "assert binary_search([1, 3, 5, 7, 9], 4) == -1",
            "assert binary_search([], 4) == -1",
        ],
    ),
    (
        "matrix_transpose",
        "Transpose of a matrix given as a list of rows.",
        "def matrix_transpose(m):\n    return [list(r) for r in zip(*m)]\n",
        ["def matrix_transpose(m):\n    return list(zip(*m))\n"],
        [
            "assert matrix_transpose([[1, 2, 3], [4, 5, 6]]) == [[1, 4], [2, 5], [3, 6]]",
            "assert matrix_transpose([[1]]) == [[1]]",
        ],
    ),
    (
        "square_area",
        "Area of a square with side a.",
        "def square_area(a):\n    return a * a\n",
        ["def square_area(a):\n    return 4 * a\n"],
        ["assert square_area(10) == 100", "assert square_area(5) == 25", "assert square_area(4) == 16"],
    ),
    (
        "is_anagram",
        "Whether two strings are anagrams (ignoring spaces and case).",
        "def is_anagram(a, b):\n    f = lambda s: sorted(s.replace(' ', '').lower())\n    return f(a) == f(b)\n",
        ["def is_anagram(a, b):\n    return set(a) == set(b)\n"],
        [
            "assert is_anagram('Listen', 'Silent') == True",
            "assert is_anagram('aab', 'abb') == False",
            "assert is_anagram('dormitory', 'dirty room') == True",
        ],
    ),
    (
        "nth_prime",
        "The n-th prime number (1-based).",
        "def nth_prime(n):\n    count, k = 0, 1\n    while count < n:\n        k += 1\n        if all(k % p for p in range(2, int(k ** 0.5) + 1)):\n            count += 1\n    return k\n",
        ["def nth_prime(n):\n    k = 2\n    while True:\n        k += 0\n"],
        ["assert nth_prime(1) == 2", "assert nth_prime(6) == 13", "assert nth_prime(100) == 541"],
    ),
    (
        "dedupe_keep_order",
        "Remove duplicates keeping the first occurrence.",
        "def dedupe_keep_order(xs):\n    return list(dict.fromkeys(xs))\n",
        ["def dedupe_keep_order(xs):\n    return sorted(set(xs))\n"],
        [
            "assert dedupe_keep_order([3, 1, 3, 2, 1]) == [3, 1, 2]",
            "assert dedupe_keep_order(['b', 'a', 'b']) == ['b', 'a']",
        ],
    ),
    (
        "sum_digits",
        "Sum of the decimal digits of a non-negative integer.",
        "def sum_digits(n):\n    return sum(int(c) for c in str(n))\n",
        ["def sum_digits(n):\n    return int(str(n)[0]) + int(str(n)[-1])\n"],
        [
            "assert sum_digits(345) == 12",
            "assert sum_digits(12) == 3",
            "assert sum_digits(97) == 16",
            "assert sum_digits(0) == 0",
        ],
    ),
    (
        "merge_sorted",
        "Merge two sorted lists.",
        "import heapq\ndef merge_sorted(a, b):\n    return list(heapq.merge(a, b))\n",
        ["def merge_sorted(a, b):\n    return a + b\n"],
        ["assert merge_sorted([1, 3, 5], [2, 4]) == [1, 2, 3, 4, 5]", "assert merge_sorted([], [1]) == [1]"],
    ),
    (
        "harmonic_sum",
        "Sum of 1/k for k = 1..n.",
        "def harmonic_sum(n):\n    return sum(1 / k for k in range(1, n + 1))\n",
        ["def harmonic_sum(n):\n    return sum(1 // k for k in range(1, n + 1))\n"],
        [
            "import math\nassert math.isclose(harmonic_sum(7), 2.5928571428571425)",
            "import math\nassert math.isclose(harmonic_sum(4), 2.083333333333333)",
        ],
    ),
    (
        "last_digit_factorial",
        "Last digit of n!.",
        "def last_digit_factorial(n):\n    r = 1\n    for k in range(2, n + 1):\n        r *= k\n    return r % 10\n",
        ["def last_digit_factorial(n):\n    return n % 10\n"],
        [
            "assert last_digit_factorial(4) == 4",
            "assert last_digit_factorial(21) == 0",
            "assert last_digit_factorial(3) == 6",
        ],
    ),
    (
        "camel_to_snake",
        "Convert camelCase to snake_case.",
        "import re\ndef camel_to_snake(s):\n    return re.sub(r'(?<!^)(?=[A-Z])', '_', s).lower()\n",
        ["def camel_to_snake(s):\n    return s.lower()\n"],
        [
            "assert camel_to_snake('PythonProgram') == 'python_program'",
            "assert camel_to_snake('camelCaseString') == 'camel_case_string'",
        ],
    ),
    (
        "safe_divide",
        "Integer division that raises ValueError on a zero divisor.",
        "def safe_divide(a, b):\n    if b == 0:\n        raise ValueError('division by zero')\n    return a // b\n",
        ["def safe_divide(a, b):\n    return a // b\n"],
        [
            "assert safe_divide(7, 2) == 3",
            "try:\n    safe_divide(1, 0)\n    raised = False\nexcept ValueError:\n    raised = True\nassert raised",
        ],
    ),
]

# ------------------------------------------------------------------------------------- stdin/stdout style
# (id, statement, correct, [wrong], [(input, output), ...])
STDIO = [
    (
        "sum-two",
        "Print the sum of two integers on one line.",
        "a, b = map(int, input().split())\nprint(a + b)\n",
        ["a, b = map(int, input().split())\nprint(a - b)\n"],
        [("1 2\n", "3\n"), ("-5 5\n", "0\n"), ("1000000000 1000000000\n", "2000000000\n")],
    ),
    (
        "reverse-words",
        "Print the words of the line in reverse order.",
        "print(' '.join(input().split()[::-1]))\n",
        ["print(input()[::-1])\n"],
        [("hello world\n", "world hello\n"), ("a b c\n", "c b a\n")],
    ),
    (
        "count-lines",
        "First line n, then n integers on separate lines; print their maximum.",
        "import sys\ndata = sys.stdin.read().split()\nn = int(data[0])\nprint(max(map(int, data[1 : n + 1])))\n",
        ["import sys\ndata = sys.stdin.read().split()\nprint(max(data[1:]))\n"],
        [("3\n1\n9\n4\n", "9\n"), ("2\n10\n9\n", "10\n"), ("1\n-7\n", "-7\n")],
    ),
    (
        "circle-area",
        "Print the area of a circle of radius r with 6 decimals.",
        "import math\nr = float(input())\nprint(f'{math.pi * r * r:.6f}')\n",
        ["r = float(input())\nprint(f'{3.14 * r * r:.6f}')\n"],
        [("1\n", "3.141593\n"), ("2.5\n", "19.634954\n")],
    ),
    (
        "fizzbuzz",
        "FizzBuzz from 1 to n, one per line.",
        "n = int(input())\nfor i in range(1, n + 1):\n    print('FizzBuzz' if i % 15 == 0 else 'Fizz' if i % 3 == 0 else 'Buzz' if i % 5 == 0 else i)\n",
        [
            "n = int(input())\nfor i in range(1, n + 1):\n    print('Fizz' if i % 3 == 0 else 'Buzz' if i % 5 == 0 else i)\n"
        ],
        [
            ("5\n", "1\n2\nFizz\n4\nBuzz\n"),
            ("15\n", "1\n2\nFizz\n4\nBuzz\nFizz\n7\n8\nFizz\nBuzz\n11\nFizz\n13\n14\nFizzBuzz\n"),
        ],
    ),
    (
        "sort-numbers",
        "Read n and n integers; print them sorted, space separated.",
        "n = int(input())\nprint(*sorted(map(int, input().split())))\n",
        ["n = int(input())\nprint(*sorted(input().split()))\n"],
        [("4\n3 1 20 2\n", "1 2 3 20\n"), ("1\n5\n", "5\n")],
    ),
    (
        "palindrome-check",
        "Print YES if the line is a palindrome, else NO.",
        "s = input().strip()\nprint('YES' if s == s[::-1] else 'NO')\n",
        ["s = input().strip()\nprint('YES' if s[0] == s[-1] else 'NO')\n"],
        [("racecar\n", "YES\n"), ("abca\n", "NO\n"), ("x\n", "YES\n")],
    ),
    (
        "gcd-pairs",
        "For each of t lines with a b, print gcd(a, b).",
        "import math\nt = int(input())\nfor _ in range(t):\n    a, b = map(int, input().split())\n    print(math.gcd(a, b))\n",
        [
            "t = int(input())\nfor _ in range(t):\n    a, b = map(int, input().split())\n    print(min(a, b))\n"
        ],
        [("3\n12 18\n7 5\n100 75\n", "6\n1\n25\n")],
    ),
    (
        "average",
        "Print the mean of the numbers on the line (any precision within 1e-6).",
        "xs = list(map(float, input().split()))\nprint(sum(xs) / len(xs))\n",
        ["xs = list(map(float, input().split()))\nprint(sum(xs) // len(xs))\n"],
        [("1 2\n", "1.5\n"), ("1 2 2\n", "1.666666667\n")],
    ),
    (
        "char-count",
        "Print the number of distinct characters of the line.",
        "print(len(set(input())))\n",
        ["print(len(input()))\n"],
        [("hello\n", "4\n"), ("aaaa\n", "1\n")],
    ),
    (
        "prefix-sums",
        "Read n numbers; print their prefix sums.",
        "input()\nacc = 0\nout = []\nfor x in map(int, input().split()):\n    acc += x\n    out.append(acc)\nprint(*out)\n",
        ["input()\nprint(*map(int, input().split()))\n"],
        [("3\n1 2 3\n", "1 3 6\n"), ("2\n-1 1\n", "-1 0\n")],
    ),
    (
        "matrix-sum",
        "Read r c then r rows; print the sum of all entries.",
        "import sys\nd = list(map(int, sys.stdin.read().split()))\nprint(sum(d[2:]))\n",
        ["import sys\nd = list(map(int, sys.stdin.read().split()))\nprint(sum(d))\n"],
        [("2 2\n1 2\n3 4\n", "10\n"), ("1 3\n5 5 5\n", "15\n")],
    ),
    (
        "vowel-upper",
        "Upper-case the vowels of the line.",
        "print(''.join(c.upper() if c in 'aeiou' else c for c in input()))\n",
        ["print(input().upper())\n"],
        [("banana\n", "bAnAnA\n"), ("xyz\n", "xyz\n")],
    ),
    (
        "min-max",
        "Print the minimum and maximum of the line's integers.",
        "xs = list(map(int, input().split()))\nprint(min(xs), max(xs))\n",
        ["xs = list(map(int, input().split()))\nprint(max(xs), min(xs))\n"],
        [("3 9 -2\n", "-2 9\n"), ("4\n", "4 4\n")],
    ),
    (
        "binary",
        "Print n in binary.",
        "print(bin(int(input()))[2:])\n",
        ["print(bin(int(input())))\n"],
        [("5\n", "101\n"), ("0\n", "0\n"), ("255\n", "11111111\n")],
    ),
    (
        "staircase",
        "Print a right-aligned staircase of n '#' rows.",
        "n = int(input())\nfor i in range(1, n + 1):\n    print(' ' * (n - i) + '#' * i)\n",
        ["n = int(input())\nfor i in range(1, n):\n    print(' ' * (n - i) + '#' * i)\n"],
        [("3\n", "  #\n ##\n###\n")],
    ),
    (
        "digit-sum-loop",
        "Repeatedly sum digits of n until one digit remains; print it.",
        "n = int(input())\nwhile n >= 10:\n    n = sum(map(int, str(n)))\nprint(n)\n",
        ["n = int(input())\nwhile n >= 10:\n    n = n // 10\nprint(n)\n"],
        [("38\n", "2\n"), ("9875\n", "2\n"), ("7\n", "7\n")],
    ),
    (
        "two-lines-concat",
        "Read two lines and print them joined by a dash.",
        "a = input()\nb = input()\nprint(a + '-' + b)\n",
        ["a = input()\nprint(a)\n"],
        [("foo\nbar\n", "foo-bar\n")],
    ),
    (
        "count-words",
        "Print the number of words in all input.",
        "import sys\nprint(len(sys.stdin.read().split()))\n",
        ["print(len(input().split()))\n"],
        [("a b\nc d e\n", "5\n"), ("one\n", "1\n")],
    ),
    (
        "power-mod",
        "Print a^b mod m for a line 'a b m'.",
        "a, b, m = map(int, input().split())\nprint(pow(a, b, m))\n",
        ["a, b, m = map(int, input().split())\nwhile True:\n    pass\n"],
        [("2 10 1000\n", "24\n"), ("3 200 13\n", "9\n")],
    ),
]


# Wrong solutions that never finish within a few seconds (infinite loops, exponential recursion):
# (problem id, index into its wrong solutions). Benchmarks can leave them out: a timeout costs every harness
# the same wall-clock time.
TIMEOUTS = {
    ("he/fib", 0),
    ("he/prime_factors", 0),
    ("mbpp/binary_search", 0),
    ("mbpp/nth_prime", 0),
    ("stdio/power-mod", 0),
}


def fence(code: str) -> str:
    return f"Here is my solution.\n\n```python\n{code}```\n"


def build() -> tuple[list[dict], list[dict]]:
    problems: list[dict] = []
    records: list[dict] = []
    for entry, prompt, body, wrongs, test in HUMANEVAL:
        pid = f"he/{entry}"
        problems.append(
            {
                "task_id": pid,
                "style": "humaneval",
                "prompt": prompt,
                "entry_point": entry,
                "test": test,
                "canonical_solution": body,
                "wrong_solutions": wrongs,
            }
        )
        ref = {"test": test, "entry_point": entry}
        # Completions as HumanEval samples: the body continuing the prompt, or a full fenced function.
        records.append(
            {
                "id": f"{pid}/correct",
                "prompt": prompt,
                "completion": body,
                "reference": ref,
                "metadata": {"expected_reward": 1.0},
            }
        )
        records.append(
            {
                "id": f"{pid}/correct-fenced",
                "prompt": prompt,
                "completion": fence(prompt + body),
                "reference": ref,
                "metadata": {"expected_reward": 1.0},
            }
        )
        for k, wrong in enumerate(wrongs):
            records.append(
                {
                    "id": f"{pid}/wrong{k}",
                    "prompt": prompt,
                    "completion": wrong,
                    "reference": ref,
                    "metadata": {"expected_reward": 0.0},
                }
            )
    for entry, text, code, wrongs, tests in MBPP:
        pid = f"mbpp/{entry}"
        problems.append(
            {
                "task_id": pid,
                "style": "mbpp",
                "text": text,
                "entry_point": entry,
                "test_list": tests,
                "code": code,
                "wrong_solutions": wrongs,
            }
        )
        prompt = f"{text} Your code should pass these tests:\n\n{tests[0]}"
        ref = {"test_list": tests}
        records.append(
            {
                "id": f"{pid}/correct",
                "prompt": prompt,
                "completion": fence(code),
                "reference": ref,
                "metadata": {"expected_reward": 1.0},
            }
        )
        for k, wrong in enumerate(wrongs):
            records.append(
                {
                    "id": f"{pid}/wrong{k}",
                    "prompt": prompt,
                    "completion": fence(wrong),
                    "reference": ref,
                    "metadata": {"expected_reward": 0.0},
                }
            )
    for pid, text, code, wrongs, cases in STDIO:
        pid = f"stdio/{pid}"
        ref = {"inputs": [i for i, _ in cases], "outputs": [o for _, o in cases]}
        problems.append(
            {
                "task_id": pid,
                "style": "stdio",
                "question": text,
                "input_output": ref,
                "solution": code,
                "wrong_solutions": wrongs,
            }
        )
        records.append(
            {
                "id": f"{pid}/correct",
                "prompt": text,
                "completion": fence(code),
                "reference": ref,
                "metadata": {"expected_reward": 1.0},
            }
        )
        for k, wrong in enumerate(wrongs):
            records.append(
                {
                    "id": f"{pid}/wrong{k}",
                    "prompt": text,
                    "completion": fence(wrong),
                    "reference": ref,
                    "metadata": {"expected_reward": 0.0},
                }
            )
    for p in problems:
        p["wrong_timeouts"] = sorted(k for pid, k in TIMEOUTS if pid == p["task_id"])
    return problems, records


def main() -> None:
    problems, records = build()
    for name, rows in (("problems.jsonl", problems), ("sample.jsonl", records)):
        with open(os.path.join(HERE, name), "w") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")
        print(f"wrote {len(rows)} rows to {name}")


if __name__ == "__main__":
    main()
