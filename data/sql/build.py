"""Builds the shipped SQL sample databases deterministically: ``python -m rewardlab.data.sql.build``.

Four small databases in Spider's layout (``databases/<db_id>/<db_id>.sqlite``), each with a second
instance ``<db_id>_ts1.sqlite`` holding different rows of the same schema (for test-suite accuracy, as in
Spider's test suites: a query that is right by coincidence on one instance fails on another).

The single source of truth is the portable SQL script this file generates (``<db_id>/<db_id>.sql`` and
``<db_id>_ts1.sql``: DDL + INSERTs that both SQLite and DuckDB accept); the ``.sqlite`` files are that
script executed into a fresh file. Rows come from ``random.Random(seed)``, so every run writes the same
scripts and, for a given SQLite version, the same database files.

``--check`` rebuilds into a temporary folder and compares table contents with the committed files.
"""

from __future__ import annotations

import argparse
import os
import random
import sqlite3
import sys
import tempfile
from collections.abc import Callable

HERE = os.path.dirname(os.path.abspath(__file__))
DB_DIR = os.path.join(HERE, "databases")

FIRST = ["Ana", "Ben", "Chen", "Dara", "Eli", "Fatima", "Goran", "Hana", "Ivan", "Jun", "Kofi", "Lena",
         "Mateo", "Nia", "Omar", "Priya", "Quinn", "Rosa", "Sven", "Tariq", "Uma", "Viktor", "Wen", "Yara"]  # fmt: skip
LAST = ["Adams", "Bauer", "Costa", "Diaz", "Evans", "Fischer", "Garcia", "Huang", "Ito", "Jensen",
        "Kim", "Lopez", "Moreau", "Novak", "Okafor", "Patel"]  # fmt: skip
COUNTRIES = ["France", "Netherlands", "United States", "Japan", "Brazil", "Nigeria", "Germany"]


def _lit(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, float):
        return repr(round(value, 2))
    if isinstance(value, int):
        return str(value)
    return "'" + str(value).replace("'", "''") + "'"


def _script(schema: list[str], tables: dict[str, list[tuple]]) -> str:
    lines = [s.strip() + ";" for s in schema]
    for table, rows in tables.items():
        for row in rows:
            lines.append(f"INSERT INTO {table} VALUES ({', '.join(_lit(v) for v in row)});")
    return "\n".join(lines) + "\n"


def _names(rng: random.Random, n: int) -> list[str]:
    seen: list[str] = []
    while len(seen) < n:
        name = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
        if name not in seen:
            seen.append(name)
    return seen


def concert_singer(rng: random.Random) -> str:
    schema = [
        """CREATE TABLE stadium (stadium_id INTEGER PRIMARY KEY, name TEXT, location TEXT, capacity INTEGER,
        highest INTEGER, lowest INTEGER, average INTEGER)""",
        """CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT, country TEXT, song_name TEXT,
        song_release_year INTEGER, age INTEGER, is_male INTEGER)""",
        """CREATE TABLE concert (concert_id INTEGER PRIMARY KEY, concert_name TEXT, theme TEXT,
        stadium_id INTEGER REFERENCES stadium(stadium_id), year INTEGER)""",
        """CREATE TABLE singer_in_concert (concert_id INTEGER REFERENCES concert(concert_id),
        singer_id INTEGER REFERENCES singer(singer_id), PRIMARY KEY (concert_id, singer_id))""",
    ]
    places = ["Raith Rovers", "Ayr United", "East Fife", "Queen's Park", "Stirling Albion", "Arbroath",
              "Alloa Athletic", "Peterhead", "Brechin City"]  # fmt: skip
    stadiums = []
    for i, loc in enumerate(rng.sample(places, 7), start=1):
        cap = rng.choice([2000, 3100, 3808, 4125, 4000, 10104, 11998, 52500])
        lo = rng.randint(300, 1500)
        hi = lo + rng.randint(200, 3000)
        stadiums.append((i, f"{loc} Park", loc, cap, hi, lo, (hi + lo) // 2))
    singers = []
    songs = ["Sun", "Gentleman", "Love", "Hey Oh", "Dangerous", "You", "Moon", "Rain", "Fire", "Stars"]
    for i, name in enumerate(_names(rng, 10), start=1):
        singers.append((i, name, rng.choice(COUNTRIES[:4]), rng.choice(songs), rng.randint(1990, 2016),
                        rng.randint(20, 55), rng.randint(0, 1)))  # fmt: skip
    concerts = []
    themes = ["Free choice", "Bleeding Love", "Wide Awake", "Happy Tonight", "Party All Night"]
    for i in range(1, 9):
        concerts.append((i, f"{rng.choice(['Auditions', 'Super bootcamp', 'Home Visits', 'Week'])} {i}",
                         rng.choice(themes), rng.randint(1, 6), rng.choice([2014, 2015, 2016])))  # fmt: skip
    pairs = sorted({(rng.randint(1, 8), rng.randint(1, 9)) for _ in range(18)})
    return _script(schema, {"stadium": stadiums, "singer": singers, "concert": concerts,
                            "singer_in_concert": pairs})  # fmt: skip


def company(rng: random.Random) -> str:
    schema = [
        "CREATE TABLE department (dept_id INTEGER PRIMARY KEY, name TEXT, budget DOUBLE, city TEXT)",
        """CREATE TABLE employee (emp_id INTEGER PRIMARY KEY, name TEXT, dept_id INTEGER REFERENCES
        department(dept_id), salary DOUBLE, hire_date TEXT, manager_id INTEGER)""",
        """CREATE TABLE project (proj_id INTEGER PRIMARY KEY, name TEXT, dept_id INTEGER REFERENCES
        department(dept_id), cost DOUBLE, status TEXT)""",
    ]
    depts = [(i, n, round(rng.uniform(1e5, 9e5), 2), rng.choice(["Berlin", "Austin", "Osaka", "Lagos"]))
             for i, n in enumerate(["Engineering", "Sales", "Marketing", "Finance", "Research"], start=1)]  # fmt: skip
    emps = []
    for i, name in enumerate(_names(rng, 24), start=1):
        manager = None if i <= 3 else rng.randint(1, 3)
        date = f"{rng.randint(2012, 2023)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        emps.append((i, name, rng.randint(1, 5), round(rng.uniform(40000, 150000), 2), date, manager))
    projs = [(i, f"Project {c}", rng.randint(1, 5), round(rng.uniform(5000, 250000), 2),
              rng.choice(["active", "done", "paused"])) for i, c in enumerate("ABCDEFGHIJKL", start=1)]  # fmt: skip
    return _script(schema, {"department": depts, "employee": emps, "project": projs})


def library(rng: random.Random) -> str:
    schema = [
        "CREATE TABLE author (author_id INTEGER PRIMARY KEY, name TEXT, birth_year INTEGER, nationality TEXT)",
        """CREATE TABLE book (book_id INTEGER PRIMARY KEY, title TEXT, author_id INTEGER REFERENCES
        author(author_id), year INTEGER, pages INTEGER, genre TEXT, rating DOUBLE)""",
        "CREATE TABLE member (member_id INTEGER PRIMARY KEY, name TEXT, joined TEXT)",
        """CREATE TABLE loan (loan_id INTEGER PRIMARY KEY, book_id INTEGER REFERENCES book(book_id),
        member_id INTEGER REFERENCES member(member_id), loan_date TEXT, return_date TEXT)""",
    ]
    authors = [(i, n, rng.randint(1920, 1990), rng.choice(COUNTRIES + [None]))
               for i, n in enumerate(_names(rng, 8), start=1)]  # fmt: skip
    words = ["Silent", "River", "Glass", "Night", "Garden", "Iron", "Paper", "Moon", "House", "Winter"]
    genres = ["fiction", "history", "science", "poetry"]
    books = []
    for i in range(1, 21):
        title = f"The {rng.choice(words)} {rng.choice(words)}"
        books.append((i, title, rng.randint(1, 8), rng.randint(1950, 2022), rng.randint(90, 900),
                      rng.choice(genres), round(rng.uniform(2.0, 5.0), 1)))  # fmt: skip
    members = [(i, n, f"20{rng.randint(15, 23)}-{rng.randint(1, 12):02d}-01")
               for i, n in enumerate(_names(rng, 12), start=1)]  # fmt: skip
    loans = []
    for i in range(1, 31):
        day = rng.randint(1, 28)
        ret = None if rng.random() < 0.25 else f"2023-{rng.randint(7, 12):02d}-{day:02d}"
        loans.append(
            (i, rng.randint(1, 20), rng.randint(1, 10), f"2023-{rng.randint(1, 6):02d}-{day:02d}", ret)
        )
    return _script(schema, {"author": authors, "book": books, "member": members, "loan": loans})


def world(rng: random.Random) -> str:
    schema = [
        """CREATE TABLE country (code TEXT PRIMARY KEY, name TEXT, continent TEXT, population INTEGER,
        gdp DOUBLE, independence_year INTEGER)""",
        """CREATE TABLE city (city_id INTEGER PRIMARY KEY, name TEXT, country_code TEXT REFERENCES
        country(code), population INTEGER, is_capital INTEGER)""",
    ]
    base = [("FRA", "France", "Europe"), ("NLD", "Netherlands", "Europe"), ("USA", "United States",
            "North America"), ("JPN", "Japan", "Asia"), ("BRA", "Brazil", "South America"), ("NGA",
            "Nigeria", "Africa"), ("DEU", "Germany", "Europe"), ("KEN", "Kenya", "Africa"), ("IND", "India",
            "Asia"), ("CAN", "Canada", "North America")]  # fmt: skip
    countries = [(c, n, k, rng.randint(5, 1400) * 1_000_000, round(rng.uniform(50, 25000), 1),
                  rng.choice([None, rng.randint(1776, 1990)])) for c, n, k in base]  # fmt: skip
    cities = []
    for i in range(1, 31):
        code = rng.choice(base)[0]
        cities.append((i, f"{rng.choice(['Port', 'San', 'New', 'Old', 'North'])} {rng.choice(LAST)} {i}",
                       code, rng.randint(50, 9000) * 1000, 0))  # fmt: skip
    seen = set()
    for idx, row in enumerate(cities):  # first city of each country is its capital
        if row[2] not in seen:
            seen.add(row[2])
            cities[idx] = row[:4] + (1,)
    return _script(schema, {"country": countries, "city": cities})


DATABASES: dict[str, Callable[[random.Random], str]] = {
    "concert_singer": concert_singer,
    "company": company,
    "library": library,
    "world": world,
}
# instance name suffix -> seed offset; "" is the main instance, "_ts1" the test-suite variant.
INSTANCES = {"": 0, "_ts1": 1000}


def build(out_dir: str = DB_DIR) -> list[str]:
    """Writes every instance's ``.sql`` script and ``.sqlite`` file under ``out_dir``; returns the files."""
    written = []
    for index, (db_id, make) in enumerate(DATABASES.items()):
        folder = os.path.join(out_dir, db_id)
        os.makedirs(folder, exist_ok=True)
        for suffix, offset in INSTANCES.items():
            script = make(random.Random(17 + index + offset))
            base = os.path.join(folder, db_id + suffix)
            with open(base + ".sql", "w", encoding="utf-8") as f:
                f.write(script)
            if os.path.exists(base + ".sqlite"):
                os.remove(base + ".sqlite")
            conn = sqlite3.connect(base + ".sqlite")
            conn.executescript("BEGIN;\n" + script + "COMMIT;\n")  # one transaction: one fsync
            conn.commit()
            conn.close()
            written += [base + ".sql", base + ".sqlite"]
    return written


def dump(path: str) -> list[tuple]:
    """Every table's rows, in a canonical order (for comparing two builds independent of file bytes)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [
            r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")
        ]
        return [(t, sorted(conn.execute(f'SELECT * FROM "{t}"').fetchall(), key=repr)) for t in tables]
    finally:
        conn.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=DB_DIR, help="output folder (default: the shipped one)")
    parser.add_argument("--check", action="store_true", help="rebuild in a temp folder and compare")
    args = parser.parse_args(argv)
    if not args.check:
        for path in build(args.out):
            print(path)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        build(tmp)
        bad = []
        for db_id in DATABASES:
            for suffix in INSTANCES:
                name = os.path.join(db_id, db_id + suffix)
                with (
                    open(os.path.join(tmp, name + ".sql")) as a,
                    open(os.path.join(args.out, name + ".sql")) as b,
                ):
                    if a.read() != b.read():
                        bad.append(name + ".sql")
                if dump(os.path.join(tmp, name + ".sqlite")) != dump(
                    os.path.join(args.out, name + ".sqlite")
                ):
                    bad.append(name + ".sqlite")
    print("mismatch: " + ", ".join(bad) if bad else "ok: shipped databases match the build")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
