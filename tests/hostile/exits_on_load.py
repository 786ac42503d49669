import sys

sys.exit(0)  # at load: the pre-run check must not end the round with exit 0
