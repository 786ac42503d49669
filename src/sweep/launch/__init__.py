"""Where Hydra meets the app: the Hydra callback and the project launcher's hooks, thin adapters over record/."""
