"""I/O only: PostgreSQL (psycopg 3) and object storage (minio SDK / local files)."""
