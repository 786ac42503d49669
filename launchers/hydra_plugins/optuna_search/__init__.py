"""`hydra/sweeper=optuna`: a search sweeper on Optuna's ask-and-tell interface (see sweeper.py)."""
