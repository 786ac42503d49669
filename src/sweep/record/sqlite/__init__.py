"""The fast twins of MLflow's SQL store for an SQLite file, used without importing MLflow (seconds): a run's rows
in one transaction (`writer`), the client calls of a sweep's start and end (`client`), the schema read and judged
(`schema`), and a new store copied from a template of MLflow's migrated empty schema (`template`). Each is gated to
the MLflow version (and schema revision) its parity test checked: tests/test_sql_run_writer.py,
tests/test_sql_client.py, tests/test_store_template.py."""
