"""The group's stores, as a whole: `python -m sweep.store migrate` copies a researcher's runs into the shared one."""
