"""Breaks the interface: train() returns a model without observe() (it cannot be told the true character), so
the run fails with the reason as training ends."""


class Guess:
    def reset(self):
        pass

    def predict(self):
        return {" ": 1.0}


def train(train_text, valid_text=None):
    return Guess()
