"""SQL execution accuracy (Spider/BIRD style) on SQLite or DuckDB, with test-suite accuracy and safety.

from rewardlab.types import Record
from rewardlab.verifiers.sql import SQLVerifier

v = SQLVerifier()
v.score(Record(completion="```sql\\nSELECT count(*) FROM singer\\n```",
               reference={"query": "SELECT count(*) FROM singer", "db": "concert_singer.sqlite"}))
"""

from rewardlab.verifiers.sql.compare import Comparison, compare_results
from rewardlab.verifiers.sql.engines import Database, QueryError, QueryOutput
from rewardlab.verifiers.sql.extract import extract_sql, has_top_level_order_by
from rewardlab.verifiers.sql.verifier import SQLConfig, SQLVerifier

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
