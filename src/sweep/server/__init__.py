"""The group's shared store: an MLflow tracking server with logins on a PostgreSQL database (`python -m sweep.server`).

config.py: the server's settings and their defaults; postgres.py: the database cluster; tracking.py: MLflow's
server over it; stack.py: both, started and stopped together (the command and the tests use it).
"""
