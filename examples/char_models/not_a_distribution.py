"""Breaks the interface: predict() returns scores that are not probabilities (they sum to 3). The run fails
with the reason, at the first prediction."""


class Scores:
    def reset(self):
        pass

    def predict(self):
        return {"e": 2.0, " ": 1.0}

    def observe(self, char):
        pass


def train(train_text, valid_text=None):
    return Scores()
