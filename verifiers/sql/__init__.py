"""SQL execution accuracy (Spider/BIRD style) on SQLite or DuckDB, with test-suite accuracy and safety.

from rewardkit.types import Record
from rewardkit.verifiers.sql import SQLVerifier

v = SQLVerifier()
v.score(Record(completion="```sql\\nSELECT count(*) FROM singer\\n```",
               reference={"query": "SELECT count(*) FROM singer", "db": "concert_singer.sqlite"}))
"""

from rewardkit.verifiers.sql.compare import Comparison, compare_results
from rewardkit.verifiers.sql.engines import Database, QueryError, QueryOutput
from rewardkit.verifiers.sql.extract import extract_sql, has_top_level_order_by
from rewardkit.verifiers.sql.verifier import SQLConfig, SQLVerifier

__all__ = [
    "Comparison",
    "Database",
    "QueryError",
    "QueryOutput",
    "SQLConfig",
    "SQLVerifier",
    "compare_results",
    "extract_sql",
    "has_top_level_order_by",
]
