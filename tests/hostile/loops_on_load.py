while True:  # at load: the pre-run check must not hang
    pass
