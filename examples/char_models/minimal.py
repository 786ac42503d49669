"""A minimal character model to copy: the next character from the current one, a table of logits trained by Adam
(torch), read as a stream. `train(train_text, valid_text=None)` returns an object with reset(), predict() and
observe(char): the group's interface (docs/char_challenge.md).

    .venv/bin/python -m sweep method=char_model method.path=examples/char_models/minimal.py:train problem=chars \
        device=torch_cpu tracker=energy
"""

import torch


class Model:
    def __init__(self, logits, vocab):
        self.probs = torch.softmax(logits, dim=-1).tolist()  # one distribution per current character
        self.vocab, self.index = vocab, {c: i for i, c in enumerate(vocab)}

    def reset(self):
        self.current = self.index.get("\n", 0)  # the stream starts as after a newline

    def predict(self):
        return dict(zip(self.vocab, self.probs[self.current]))

    def observe(self, char):
        self.current = self.index.get(char, self.current)  # a character never seen: keep the last one


def train(train_text, valid_text=None, steps=200, batch=4096):
    vocab = sorted(set(train_text))
    ids = torch.tensor([vocab.index(c) for c in train_text[:200_000]])
    logits = torch.zeros(len(vocab), len(vocab), requires_grad=True)
    opt = torch.optim.Adam([logits], lr=0.1)
    for _ in range(steps):
        i = torch.randint(len(ids) - 1, (batch,))
        loss = torch.nn.functional.cross_entropy(logits[ids[i]], ids[i + 1])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return Model(logits.detach(), vocab)
