"""The character-level language models of problem=chars: bigram (counts), mlp_lm (Bengio et al. 2003) and gpt
(nanoGPT's transformer); the two trained ones share training.py (their hyper-parameters) and train.py (the loop)."""
