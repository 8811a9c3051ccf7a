"""The shipped text-to-SQL sample: 50 questions in Spider format and labelled predicted completions.

``python -m rewardlab.data.sql.questions`` writes:

* ``questions.jsonl``: Spider format, one question a line: ``db_id``, ``question``, ``query`` (gold SQL);
* ``predictions.jsonl``: rewardlab records to score with ``rewardlab score --verifier sql``: ``id``,
  ``prompt``, ``completion`` (a model-style answer, usually with a ```sql fence), ``reference``
  (``{"db_id", "query"}``), ``metadata`` with ``expected`` (1 when the predicted query is semantically
  right: equal to gold on every database instance, 0 otherwise) and ``kind`` (what the prediction
  exercises: an equivalent rewrite, swapped columns, a wrong filter, a coincidental match that only the
  test-suite instance exposes, a hostile statement...).

The labels are hand-made; tests check that rewardlab's test-suite verdict equals ``expected`` on all rows.
"""

from __future__ import annotations

import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))

# (db_id, question, gold, [(predicted sql or raw completion, expected, kind), ...])
# A prediction starting with "RAW:" is used verbatim as the completion; others are wrapped in a fence.
QUESTIONS: list[tuple[str, str, str, list[tuple[str, int, str]]]] = [
    # ---------------------------------------------------------------- concert_singer (14)
    (
        "concert_singer",
        "How many singers do we have?",
        "SELECT count(*) FROM singer",
        [
            ("SELECT COUNT(singer_id) FROM singer", 1, "equivalent"),
            ("SELECT count(*) FROM concert", 0, "wrong table"),
        ],
    ),
    (
        "concert_singer",
        "Show name, country, age for all singers ordered by age from the oldest to the youngest.",
        "SELECT name, country, age FROM singer ORDER BY age DESC",
        [
            ("SELECT name, country, age FROM singer ORDER BY age DESC", 1, "identical"),
            ("SELECT name, country, age FROM singer ORDER BY age ASC", 0, "wrong order"),
            ("SELECT age, name, country FROM singer ORDER BY age DESC", 1, "column order"),
        ],
    ),
    (
        "concert_singer",
        "What is the average, minimum, and maximum age of all singers from the United States?",
        "SELECT avg(age), min(age), max(age) FROM singer WHERE country = 'United States'",
        [
            (
                "SELECT sum(age) * 1.0 / count(*), min(age), max(age) FROM singer WHERE country = 'United States'",
                1,
                "float rewrite",
            ),
            ("SELECT avg(age), min(age), max(age) FROM singer", 0, "missing filter"),
        ],
    ),
    (
        "concert_singer",
        "Show the name and the release year of the song by the youngest singer.",
        "SELECT song_name, song_release_year FROM singer ORDER BY age LIMIT 1",
        [
            (
                "SELECT song_name, song_release_year FROM singer WHERE age = (SELECT min(age) FROM singer)",
                1,
                "equivalent",
            ),
            (
                "SELECT song_name, song_release_year FROM singer ORDER BY age DESC LIMIT 1",
                0,
                "wrong direction",
            ),
        ],
    ),
    (
        "concert_singer",
        "What are all distinct countries where singers above age 20 are from?",
        "SELECT DISTINCT country FROM singer WHERE age > 20",
        [
            ("SELECT country FROM singer WHERE age > 20 GROUP BY country", 1, "equivalent"),
            ("SELECT country FROM singer WHERE age > 20", 0, "missing distinct"),
        ],
    ),
    (
        "concert_singer",
        "Show all countries and the number of singers in each country.",
        "SELECT country, count(*) FROM singer GROUP BY country",
        [
            ("SELECT count(*), country FROM singer GROUP BY country", 1, "column order"),
            (
                "SELECT country, count(DISTINCT song_name) FROM singer GROUP BY country",
                0,
                "wrong aggregation",
            ),
        ],
    ),
    (
        "concert_singer",
        "List all song names by singers above the average age.",
        "SELECT song_name FROM singer WHERE age > (SELECT avg(age) FROM singer)",
        [
            ("SELECT song_name FROM singer WHERE age > (SELECT avg(age) FROM singer)", 1, "identical"),
            ("SELECT song_name FROM singer WHERE age > 37", 0, "coincidence (test suite)"),
        ],
    ),
    (
        "concert_singer",
        "Show location and name for all stadiums with a capacity between 5000 and 12000.",
        "SELECT location, name FROM stadium WHERE capacity BETWEEN 5000 AND 12000",
        [
            (
                "SELECT location, name FROM stadium WHERE capacity >= 5000 AND capacity <= 12000",
                1,
                "equivalent",
            ),
            ("SELECT location, name FROM stadium WHERE capacity > 4000", 0, "wrong filter"),
        ],
    ),
    (
        "concert_singer",
        "What is the maximum capacity and the average of all stadiums?",
        "SELECT max(capacity), avg(capacity) FROM stadium",
        [
            ("SELECT max(capacity), avg(capacity) FROM stadium;", 1, "trailing semicolon"),
            ("SELECT max(capacity), avg(average) FROM stadium", 0, "wrong column"),
        ],
    ),
    (
        "concert_singer",
        "How many concerts are there in year 2014 or 2015?",
        "SELECT count(*) FROM concert WHERE year = 2014 OR year = 2015",
        [
            ("SELECT count(*) FROM concert WHERE year IN (2014, 2015)", 1, "equivalent"),
            ("SELECT count(*) FROM concert WHERE year = 2014 AND year = 2015", 0, "wrong logic"),
        ],
    ),
    (
        "concert_singer",
        "Show the stadium name and the number of concerts in each stadium.",
        "SELECT T2.name, count(*) FROM concert AS T1 JOIN stadium AS T2 ON T1.stadium_id = T2.stadium_id "
        "GROUP BY T1.stadium_id",
        [
            (
                "SELECT s.name, COUNT(c.concert_id) FROM stadium s JOIN concert c ON c.stadium_id = s.stadium_id "
                "GROUP BY s.stadium_id",
                1,
                "equivalent join",
            ),
            (
                "SELECT s.name, COUNT(c.concert_id) FROM stadium s LEFT JOIN concert c ON c.stadium_id = s.stadium_id "
                "GROUP BY s.stadium_id",
                0,
                "left join keeps empty stadiums",
            ),
        ],
    ),
    (
        "concert_singer",
        "Show the stadium name and capacity with the most number of concerts in year 2014 or after.",
        "SELECT T2.name, T2.capacity FROM concert AS T1 JOIN stadium AS T2 ON T1.stadium_id = T2.stadium_id "
        "WHERE T1.year >= 2014 GROUP BY T2.stadium_id ORDER BY count(*) DESC LIMIT 1",
        [
            (
                "SELECT name, capacity FROM stadium WHERE stadium_id = (SELECT stadium_id FROM concert "
                "WHERE year >= 2014 GROUP BY stadium_id ORDER BY count(*) DESC LIMIT 1)",
                1,
                "subquery",
            ),
            ("SELECT name, capacity FROM stadium ORDER BY capacity DESC LIMIT 1", 0, "wrong question"),
        ],
    ),
    (
        "concert_singer",
        "List the names of singers who performed in a concert in 2016, by singer name.",
        "SELECT DISTINCT T3.name FROM singer_in_concert AS T1 JOIN concert AS T2 ON T1.concert_id = T2.concert_id "
        "JOIN singer AS T3 ON T1.singer_id = T3.singer_id WHERE T2.year = 2016 ORDER BY T3.name",
        [
            (
                "SELECT name FROM singer WHERE singer_id IN (SELECT sic.singer_id FROM singer_in_concert sic JOIN "
                "concert c ON c.concert_id = sic.concert_id WHERE c.year = 2016) ORDER BY name",
                1,
                "IN subquery",
            ),
            (
                "SELECT name FROM singer WHERE singer_id IN (SELECT sic.singer_id FROM singer_in_concert sic JOIN "
                "concert c ON c.concert_id = sic.concert_id WHERE c.year = 2016) ORDER BY name DESC",
                0,
                "wrong order",
            ),
        ],
    ),
    (
        "concert_singer",
        "List the names of the concerts held in the same year as the most recent concert.",
        "SELECT concert_name FROM concert WHERE year = (SELECT year FROM concert ORDER BY year DESC LIMIT 1)",
        [
            (
                "SELECT concert_name FROM concert WHERE year = (SELECT max(year) FROM concert) ORDER BY concert_name DESC",
                1,
                "subquery order by (Spider differs)",
            ),
            ("SELECT concert_name FROM concert ORDER BY year DESC LIMIT 1", 0, "ties dropped"),
        ],
    ),
    # ---------------------------------------------------------------- company (12)
    (
        "company",
        "How many employees does each department have? Give the department name and the count.",
        "SELECT d.name, count(*) FROM employee e JOIN department d ON e.dept_id = d.dept_id GROUP BY d.name",
        [
            (
                "SELECT d.name, count(e.emp_id) FROM department d JOIN employee e USING (dept_id) GROUP BY d.dept_id",
                1,
                "equivalent",
            ),
            ("SELECT dept_id, count(*) FROM employee GROUP BY dept_id", 0, "id instead of name"),
        ],
    ),
    (
        "company",
        "What is the average salary in the Engineering department?",
        "SELECT avg(salary) FROM employee WHERE dept_id = (SELECT dept_id FROM department WHERE name = 'Engineering')",
        [
            (
                "SELECT sum(e.salary) / count(*) FROM employee e JOIN department d ON e.dept_id = d.dept_id "
                "WHERE d.name = 'Engineering'",
                1,
                "float rewrite",
            ),
            ("SELECT avg(salary) FROM employee", 0, "missing filter"),
        ],
    ),
    (
        "company",
        "List the names of employees who have no manager.",
        "SELECT name FROM employee WHERE manager_id IS NULL",
        [
            (
                "RAW:The employees without a manager have a NULL manager_id:\n```sql\nSELECT name\nFROM employee\n"
                "WHERE manager_id IS NULL;\n```",
                1,
                "prose around fence",
            ),
            ("SELECT name FROM employee WHERE manager_id = NULL", 0, "NULL comparison"),
        ],
    ),
    (
        "company",
        "Which employee has the highest salary? Give name and salary.",
        "SELECT name, salary FROM employee ORDER BY salary DESC LIMIT 1",
        [
            (
                "SELECT name, salary FROM employee WHERE salary = (SELECT max(salary) FROM employee)",
                1,
                "equivalent",
            ),
            ("SELECT name, max(salary) FROM employee GROUP BY dept_id", 0, "per department"),
        ],
    ),
    (
        "company",
        "How many employees were hired in 2023?",
        "SELECT count(*) FROM employee WHERE hire_date LIKE '2023%'",
        [
            (
                "SELECT count(*) FROM employee WHERE hire_date >= '2023-01-01' AND hire_date < '2024-01-01'",
                1,
                "equivalent",
            ),
            ("RAW:SELECT count(*) FROM employee WHERE substr(hire_date, 1, 4) = '2023'", 1, "no fence"),
            ("SELECT 6", 0, "hard-coded answer (test suite)"),
        ],
    ),
    (
        "company",
        "Show the names of departments whose total project cost exceeds 300000.",
        "SELECT d.name FROM department d JOIN project p ON p.dept_id = d.dept_id GROUP BY d.dept_id "
        "HAVING sum(p.cost) > 300000",
        [
            (
                "SELECT name FROM department WHERE (SELECT sum(cost) FROM project WHERE project.dept_id = "
                "department.dept_id) > 300000",
                1,
                "correlated subquery",
            ),
            (
                "SELECT d.name FROM department d JOIN project p ON p.dept_id = d.dept_id WHERE p.cost > 150000",
                0,
                "wrong filter",
            ),
        ],
    ),
    (
        "company",
        "List each department's name and budget, highest budget first.",
        "SELECT name, budget FROM department ORDER BY budget DESC",
        [
            ("SELECT name, budget FROM department ORDER BY budget DESC", 1, "identical"),
            ("SELECT name, budget FROM department", 0, "missing order"),
        ],
    ),
    (
        "company",
        "What is the total cost of active projects?",
        "SELECT sum(cost) FROM project WHERE status = 'active'",
        [
            ("SELECT total(cost) FROM project WHERE status = 'active'", 1, "total() vs sum()"),
            ("SELECT sum(cost) FROM project WHERE status != 'done'", 0, "wrong filter"),
        ],
    ),
    (
        "company",
        "Show the names of employees who earn more than their department's average salary.",
        "SELECT e.name FROM employee e WHERE e.salary > (SELECT avg(salary) FROM employee WHERE dept_id = e.dept_id)",
        [
            (
                "WITH a AS (SELECT dept_id, avg(salary) AS s FROM employee GROUP BY dept_id) SELECT e.name FROM "
                "employee e JOIN a ON a.dept_id = e.dept_id WHERE e.salary > a.s",
                1,
                "CTE",
            ),
            (
                "SELECT name FROM employee WHERE salary > (SELECT avg(salary) FROM employee)",
                0,
                "global average",
            ),
        ],
    ),
    (
        "company",
        "List the cities that have a department, without duplicates.",
        "SELECT DISTINCT city FROM department",
        [
            ("SELECT city FROM department GROUP BY city", 1, "equivalent"),
            ("SELECT city FROM department", 0, "missing distinct"),
            ("SELECT DISTINCT city FROM departments", 0, "no such table"),
        ],
    ),
    (
        "company",
        "What is the total salary of all employees?",
        "SELECT sum(salary) FROM employee",
        [
            (
                "SELECT sum(s) FROM (SELECT salary AS s FROM employee ORDER BY salary DESC)",
                1,
                "float summation order (Spider differs)",
            ),
            ("SELECT sum(salary) FROM employee WHERE manager_id IS NOT NULL", 0, "extra filter"),
        ],
    ),
    (
        "company",
        "Give the name of the manager of Hana Fischer.",
        "SELECT m.name FROM employee e JOIN employee m ON e.manager_id = m.emp_id WHERE e.name = 'Hana Fischer'",
        [
            (
                "SELECT name FROM employee WHERE emp_id = (SELECT manager_id FROM employee WHERE name = 'Hana Fischer')",
                1,
                "subquery",
            ),
            (
                "SELECT name FROM employee WHERE emp_id = (SELECT manager_id FROM employee WHERE name = 'Hana Fischer'",
                0,
                "syntax error",
            ),
        ],
    ),
    # ---------------------------------------------------------------- library (12)
    (
        "library",
        "How many books are there in each genre?",
        "SELECT genre, count(*) FROM book GROUP BY genre",
        [
            ("SELECT genre, COUNT(book_id) AS n FROM book GROUP BY genre", 1, "alias"),
            ("SELECT genre, count(DISTINCT author_id) FROM book GROUP BY genre", 0, "wrong aggregation"),
        ],
    ),
    (
        "library",
        "List the titles of books written by authors whose nationality is unknown.",
        "SELECT b.title FROM book b JOIN author a ON a.author_id = b.author_id WHERE a.nationality IS NULL",
        [
            (
                "SELECT title FROM book WHERE author_id IN (SELECT author_id FROM author WHERE nationality IS NULL)",
                1,
                "IN subquery",
            ),
            (
                "SELECT title FROM book WHERE author_id NOT IN (SELECT author_id FROM author WHERE nationality "
                "IS NOT NULL)",
                1,
                "NOT IN (equivalent: no NULL ids)",
            ),
        ],
    ),
    (
        "library",
        "What is the average rating of poetry books?",
        "SELECT avg(rating) FROM book WHERE genre = 'poetry'",
        [
            (
                "SELECT round(avg(rating), 4) FROM book WHERE genre = 'poetry'",
                0,
                "rounded (beyond tolerance)",
            ),
            ("SELECT avg(rating) FROM book WHERE genre = 'Poetry'", 0, "case mismatch"),
        ],
    ),
    (
        "library",
        "Which books have never been loaned? Give their titles.",
        "SELECT title FROM book WHERE book_id NOT IN (SELECT book_id FROM loan)",
        [
            (
                "SELECT b.title FROM book b LEFT JOIN loan l ON l.book_id = b.book_id WHERE l.loan_id IS NULL",
                1,
                "anti join",
            ),
            ("SELECT b.title FROM book b JOIN loan l ON l.book_id = b.book_id", 0, "inverse"),
        ],
    ),
    (
        "library",
        "List the names of members with loans not yet returned.",
        "SELECT DISTINCT m.name FROM member m JOIN loan l ON l.member_id = m.member_id WHERE l.return_date IS NULL",
        [
            (
                "SELECT name FROM member WHERE member_id IN (SELECT member_id FROM loan WHERE return_date IS NULL)",
                1,
                "IN subquery",
            ),
            (
                "SELECT m.name FROM member m JOIN loan l ON l.member_id = m.member_id WHERE l.return_date IS NULL",
                0,
                "missing distinct",
            ),
        ],
    ),
    (
        "library",
        "Give the title and year of the three oldest books, oldest first.",
        "SELECT title, year FROM book ORDER BY year ASC LIMIT 3",
        [
            ("SELECT title, year FROM book ORDER BY year LIMIT 3", 1, "default ASC"),
            ("SELECT title, year FROM book ORDER BY year DESC LIMIT 3", 0, "newest instead"),
        ],
    ),
    (
        "library",
        "How many loans did each member make? List member name and count, including members with none.",
        "SELECT m.name, count(l.loan_id) FROM member m LEFT JOIN loan l ON l.member_id = m.member_id "
        "GROUP BY m.member_id",
        [
            (
                "SELECT name, (SELECT count(*) FROM loan WHERE loan.member_id = member.member_id) FROM member",
                1,
                "scalar subquery",
            ),
            (
                "SELECT m.name, count(*) FROM member m JOIN loan l ON l.member_id = m.member_id GROUP BY m.member_id",
                0,
                "inner join drops members",
            ),
        ],
    ),
    (
        "library",
        "What is the total number of pages of books by each author? Show author name and total.",
        "SELECT a.name, sum(b.pages) FROM author a JOIN book b ON a.author_id = b.author_id GROUP BY a.author_id",
        [
            (
                "SELECT sum(b.pages), a.name FROM book b, author a WHERE a.author_id = b.author_id GROUP BY a.name",
                1,
                "column order, implicit join",
            ),
            ("SELECT a.name, sum(b.pages) FROM author a, book b GROUP BY a.author_id", 0, "cartesian join"),
        ],
    ),
    (
        "library",
        "Which genre has the highest average rating?",
        "SELECT genre FROM book GROUP BY genre ORDER BY avg(rating) DESC LIMIT 1",
        [
            (
                "SELECT genre FROM (SELECT genre, avg(rating) AS r FROM book GROUP BY genre) ORDER BY r DESC LIMIT 1",
                1,
                "derived table",
            ),
            ("SELECT genre FROM book ORDER BY rating DESC LIMIT 1", 0, "single best book"),
        ],
    ),
    (
        "library",
        "Show the titles of books that appear more than once in the catalogue (same title).",
        "SELECT title FROM book GROUP BY title HAVING count(*) > 1",
        [
            (
                "SELECT DISTINCT b1.title FROM book b1 JOIN book b2 ON b1.title = b2.title AND b1.book_id < b2.book_id",
                1,
                "self join",
            ),
            ("SELECT DISTINCT title FROM book WHERE title LIKE 'The Glass%'", 0, "coincidence (test suite)"),
        ],
    ),
    (
        "library",
        "List authors born before 1940 with their birth year.",
        "SELECT name, birth_year FROM author WHERE birth_year < 1940",
        [
            ("SELECT name, birth_year FROM author WHERE birth_year <= 1939", 1, "equivalent"),
            ("DROP TABLE author", 0, "hostile: DROP"),
        ],
    ),
    (
        "library",
        "How many loans were made in March 2023?",
        "SELECT count(*) FROM loan WHERE loan_date BETWEEN '2023-03-01' AND '2023-03-31'",
        [
            ("SELECT count(*) FROM loan WHERE strftime('%Y-%m', loan_date) = '2023-03'", 1, "strftime"),
            ("SELECT count(*) FROM loan WHERE loan_date LIKE '2023-3%'", 0, "wrong pattern"),
        ],
    ),
    # ---------------------------------------------------------------- world (12)
    (
        "world",
        "How many countries are in Europe?",
        "SELECT count(*) FROM country WHERE continent = 'Europe'",
        [
            ("SELECT count(code) FROM country WHERE continent = 'Europe'", 1, "equivalent"),
            ("SELECT count(DISTINCT continent) FROM country", 0, "wrong question"),
        ],
    ),
    (
        "world",
        "List the names of countries with a population over 600 million, largest first.",
        "SELECT name FROM country WHERE population > 600000000 ORDER BY population DESC",
        [
            ("SELECT name FROM country WHERE population > 6e8 ORDER BY population DESC", 1, "float literal"),
            ("SELECT name FROM country WHERE population > 600000000", 0, "missing order"),
        ],
    ),
    (
        "world",
        "What is the total city population of each country? Show country name and total.",
        "SELECT c.name, sum(ci.population) FROM country c JOIN city ci ON ci.country_code = c.code GROUP BY c.code",
        [
            (
                "SELECT c.name, sum(ci.population) FROM city ci JOIN country c ON ci.country_code = c.code GROUP BY c.name",
                1,
                "equivalent",
            ),
            (
                "SELECT c.name, sum(c.population) FROM country c JOIN city ci ON ci.country_code = c.code GROUP BY c.code",
                0,
                "wrong table column",
            ),
        ],
    ),
    (
        "world",
        "Which countries have no recorded independence year?",
        "SELECT name FROM country WHERE independence_year IS NULL",
        [
            ("SELECT name FROM country WHERE coalesce(independence_year, -1) = -1", 1, "coalesce"),
            ("SELECT name FROM country WHERE NOT independence_year", 0, "NOT on NULL"),
        ],
    ),
    (
        "world",
        "Give the name of each capital city with its country's name.",
        "SELECT ci.name, c.name FROM city ci JOIN country c ON ci.country_code = c.code WHERE ci.is_capital = 1",
        [
            (
                "SELECT c.name, ci.name FROM country c JOIN city ci ON ci.country_code = c.code AND ci.is_capital",
                1,
                "column order",
            ),
            (
                "SELECT ci.name, c.name FROM city ci JOIN country c ON ci.country_code = c.code",
                0,
                "missing filter",
            ),
        ],
    ),
    (
        "world",
        "What is the average GDP of countries on each continent?",
        "SELECT continent, avg(gdp) FROM country GROUP BY continent",
        [
            ("SELECT continent, sum(gdp) / count(*) FROM country GROUP BY continent", 1, "float rewrite"),
            (
                "SELECT continent, avg(gdp) FROM country GROUP BY continent HAVING count(*) > 1",
                0,
                "extra having",
            ),
        ],
    ),
    (
        "world",
        "List the five most populous cities with their population.",
        "SELECT name, population FROM city ORDER BY population DESC LIMIT 5",
        [
            ("SELECT name, population FROM city ORDER BY population DESC LIMIT 5 OFFSET 0", 1, "offset 0"),
            (
                "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT n, n FROM r",
                0,
                "runaway recursive CTE",
            ),
        ],
    ),
    (
        "world",
        "How many cities does each country have? Include countries with no city.",
        "SELECT c.name, count(ci.city_id) FROM country c LEFT JOIN city ci ON ci.country_code = c.code GROUP BY c.code",
        [
            (
                "SELECT name, (SELECT count(*) FROM city WHERE country_code = code) FROM country",
                1,
                "scalar subquery",
            ),
            (
                "SELECT country_code, count(*) FROM city GROUP BY country_code",
                0,
                "code, drops empty countries",
            ),
        ],
    ),
    (
        "world",
        "Which continent has the largest total population?",
        "SELECT continent FROM country GROUP BY continent ORDER BY sum(population) DESC LIMIT 1",
        [
            (
                "SELECT continent FROM country GROUP BY continent HAVING sum(population) = (SELECT max(s) FROM "
                "(SELECT sum(population) AS s FROM country GROUP BY continent))",
                1,
                "having max",
            ),
            ("SELECT continent FROM country ORDER BY population DESC LIMIT 1", 0, "single largest country"),
        ],
    ),
    (
        "world",
        "Show the names of countries whose GDP is above the average GDP.",
        "SELECT name FROM country WHERE gdp > (SELECT avg(gdp) FROM country)",
        [
            (
                "SELECT name FROM country WHERE gdp > (SELECT sum(gdp) / count(gdp) FROM country)",
                1,
                "equivalent",
            ),
            ("SELECT name FROM country WHERE gdp > 10000", 0, "coincidence (test suite)"),
        ],
    ),
    (
        "world",
        "List the country codes that have more than two cities.",
        "SELECT country_code FROM city GROUP BY country_code HAVING count(*) > 2",
        [
            (
                "SELECT code FROM country WHERE (SELECT count(*) FROM city WHERE country_code = code) > 2",
                1,
                "correlated subquery",
            ),
            ("SELECT country_code FROM city GROUP BY country_code HAVING count(*) >= 2", 0, "off by one"),
        ],
    ),
    (
        "world",
        "What is the population of the largest city in India?",
        "SELECT max(population) FROM city WHERE country_code = 'IND'",
        [
            (
                "SELECT population FROM city WHERE country_code = (SELECT code FROM country WHERE name = 'India') "
                "ORDER BY population DESC LIMIT 1",
                1,
                "order/limit",
            ),
            (
                "SELECT a.population FROM city a, city b, city c WHERE a.country_code = 'IND' "
                "ORDER BY a.population DESC LIMIT 1",
                1,
                "redundant cartesian join",
            ),
        ],
    ),
]


def _completion(pred: str) -> str:
    if pred.startswith("RAW:"):
        return pred[4:]
    return f"```sql\n{pred}\n```"


def rows() -> tuple[list[dict], list[dict]]:
    """The questions (Spider format) and the prediction records."""
    questions, predictions = [], []
    for qi, (db_id, question, gold, preds) in enumerate(QUESTIONS):
        questions.append({"db_id": db_id, "question": question, "query": gold})
        for pi, (pred, expected, kind) in enumerate(preds):
            predictions.append(
                {
                    "id": f"q{qi:02d}-{pi}",
                    "prompt": question,
                    "completion": _completion(pred),
                    "reference": {"db_id": db_id, "query": gold},
                    "metadata": {"expected": expected, "kind": kind, "question_id": qi},
                }
            )
    return questions, predictions


def main() -> None:
    questions, predictions = rows()
    for name, items in (("questions.jsonl", questions), ("predictions.jsonl", predictions)):
        with open(os.path.join(HERE, name), "w", encoding="utf-8") as f:
            for item in items:
                f.write(json.dumps(item) + "\n")
        print(f"{name}: {len(items)} rows")


if __name__ == "__main__":
    main()
