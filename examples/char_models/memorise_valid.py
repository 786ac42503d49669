"""A model that learns nothing general: it stores the validation text it is given and replays it. Under the
group's rule (challenge.gate_split=valid: the gate scored on the text train() received) it passes any floor for
almost no energy; scored on the test split (the default) it is no better than its fallback guess."""


class Replay:
    def __init__(self, text):
        self.text = text

    def reset(self):
        self.i = 0

    def predict(self):
        if self.i < len(self.text):
            return {self.text[self.i]: 1.0}
        return {" ": 1.0}

    def observe(self, char):
        self.i += 1


def train(train_text, valid_text=None):
    return Replay(valid_text or "")
